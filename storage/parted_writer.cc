#include "storage/parted_writer.h"

#include <algorithm>
#include <utility>

namespace podscope::storage {

PartedWriter::PartedWriter(std::string object_url, size_t part_bytes)
    : object_url_(std::move(object_url)), part_bytes_(part_bytes) {
  part_.reserve(part_bytes_);
}

absl::Status PartedWriter::write(std::string_view bytes) {
  if (!status_.ok()) return status_;
  if (finished_) return absl::FailedPreconditionError("writing " + object_url_ + " after its end");
  written_ += bytes.size();
  while (!bytes.empty()) {
    const size_t n = std::min(bytes.size(), part_bytes_ - part_.size());
    part_.append(bytes.data(), n);
    bytes.remove_prefix(n);
    if (part_.size() == part_bytes_) {
      if (absl::Status s = send_full_part(); !s.ok()) return fail(s);
    }
  }
  return absl::OkStatus();
}

absl::Status PartedWriter::commit() {
  if (!status_.ok()) return status_;
  if (finished_) return absl::FailedPreconditionError("committing " + object_url_ + " twice");
  finished_ = true;
  if (absl::Status s = finish(); !s.ok()) return fail(s);
  return absl::OkStatus();
}

void PartedWriter::abort() {
  finished_ = true;
  part_ = std::string();
  give_up();
}

absl::Status PartedWriter::fail(absl::Status status) {
  status_ = std::move(status);
  abort();
  return status_;
}

}  // namespace podscope::storage
