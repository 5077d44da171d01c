#include "xspace/xspace_stream_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/wire_format_lite.h"

namespace podscope::xspace {
namespace {

using google::protobuf::internal::WireFormatLite;

constexpr int kPlanesField = 1;
constexpr int kErrorsField = 2;
constexpr int kWarningsField = 3;
constexpr int kHostnamesField = 4;

// Closes the descriptor whatever way the read ends.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

absl::Status read_xspace_planes(const std::filesystem::path& path,
                                const std::function<absl::Status(const tensorflow::profiler::XPlane&)>& on_plane,
                                XSpaceHeader* header) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return absl::NotFoundError("cannot open XSpace file " + path.string() + ": " + std::strerror(errno));
  }
  google::protobuf::io::FileInputStream file(fd.get());
  google::protobuf::io::CodedInputStream input(&file);
  // A single plane may be far larger than protobuf's default message limit.
  input.SetTotalBytesLimit(std::numeric_limits<int>::max());
  auto broken = [&](std::string_view what) {
    return absl::DataLossError("XSpace file " + path.string() + " is not a valid XSpace at byte " +
                               std::to_string(input.CurrentPosition()) + ": " + std::string(what));
  };

  tensorflow::profiler::XPlane plane;
  while (true) {
    const uint32_t tag = input.ReadTag();
    if (tag == 0) break;
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto wire_type = WireFormatLite::GetTagWireType(tag);
    if (wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED && field == kPlanesField) {
      uint32_t length = 0;
      if (!input.ReadVarint32(&length)) return broken("truncated plane length");
      const auto limit = input.PushLimit(static_cast<int>(length));
      plane.Clear();
      if (!plane.MergeFromCodedStream(&input) || !input.ConsumedEntireMessage() || input.BytesUntilLimit() != 0) {
        return broken("plane does not parse");
      }
      input.PopLimit(limit);
      if (absl::Status s = on_plane(plane); !s.ok()) return s;
    } else if (wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
               (field == kErrorsField || field == kWarningsField || field == kHostnamesField)) {
      std::string value;
      if (!WireFormatLite::ReadString(&input, &value)) return broken("truncated string field");
      if (header != nullptr) {
        (field == kErrorsField ? header->errors : field == kWarningsField ? header->warnings : header->hostnames)
            .push_back(std::move(value));
      }
    } else if (!WireFormatLite::SkipField(&input, tag)) {
      return broken("unknown field " + std::to_string(field) + " cannot be skipped");
    }
  }
  if (file.GetErrno() != 0) {
    return absl::DataLossError("reading XSpace file " + path.string() + ": " + std::strerror(file.GetErrno()));
  }
  return absl::OkStatus();
}

}  // namespace podscope::xspace
