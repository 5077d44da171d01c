// What the bucket stores' writers share: bytes gathered into parts of a fixed size, each sent as it fills (S3's
// multipart upload, Cloud Storage's resumable session), so a writer holds a bounded amount whatever the object's size.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "storage/store.h"

namespace podscope::storage {

// A bucket's object written in parts of a fixed size, each handed over as it fills and the last at commit(). The
// first failure is kept and gives the object up.
class PartedWriter : public ObjectWriter {
 public:
  absl::Status write(std::string_view bytes) final;
  absl::Status commit() final;
  void abort() final;
  uint64_t bytes_written() const final { return written_; }

 protected:
  // `object_url` names the object in messages.
  PartedWriter(std::string object_url, size_t part_bytes);
  // Sends part_, full.
  virtual absl::Status send_full_part() = 0;
  // Sends what part_ holds (maybe nothing) as the object's end and makes the object.
  virtual absl::Status finish() = 0;
  // Gives up what was begun with the service (an upload, a session), if anything.
  virtual void give_up() = 0;

  std::string part_;

 private:
  absl::Status fail(absl::Status status);

  std::string object_url_;
  size_t part_bytes_;
  uint64_t written_ = 0;
  bool finished_ = false;
  absl::Status status_;
};

}  // namespace podscope::storage
