// Reads an XSpace file one plane at a time, so a reader never holds the whole parsed XSpace (whose heap
// is several times the file size). Follows the XSpace wire format: field 1 = planes, 2 = errors,
// 3 = warnings, 4 = hostnames; anything else is skipped.
#pragma once

#include <filesystem>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::xspace {

// The XSpace's fields other than planes.
struct XSpaceHeader {
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
  std::vector<std::string> hostnames;
};

// Decides from a plane's and a line's names whether the line's events are wanted. A line whose name
// comes after its events on the wire (never in files protobuf wrote) is always kept.
using XLineFilter = std::function<bool(std::string_view plane_name, std::string_view line_name)>;

// Calls `on_plane` for every plane in file order; the plane is the reader's own (a caller may add to it) and is freed
// when it returns. Lines that
// `keep_line` rejects are left out without parsing their events. The file's whole wire structure is checked first
// (every declared length within what holds it, read as 64 bits; strings valid UTF-8; the file ending where its last
// field does): a truncated file, or one whose lengths lie, is DataLoss naming the file and the byte where it broke,
// and `on_plane` is called for none of its planes. Otherwise stops at the first error from `on_plane`.
absl::Status read_xspace_planes(const std::filesystem::path& path,
                                const std::function<absl::Status(tensorflow::profiler::XPlane&)>& on_plane,
                                XSpaceHeader* header = nullptr, const XLineFilter& keep_line = nullptr);

// An XSpace that is read as a stream (an object in a bucket) rather than mapped: its size, its name for messages, and
// how to read it from its first byte (it is read twice: checked, then parsed).
struct XSpaceSource {
  std::string name;
  int64_t size = 0;
  std::function<absl::StatusOr<std::unique_ptr<google::protobuf::io::ZeroCopyInputStream>>()> open;
};

// read_xspace_planes of a stream: the same structure check in a first pass over it (nothing is kept), the planes
// handed out in a second. A stream that ends before its size, or runs past it, is DataLoss as a truncated file is.
absl::Status read_xspace_planes(const XSpaceSource& source,
                                const std::function<absl::Status(tensorflow::profiler::XPlane&)>& on_plane,
                                XSpaceHeader* header = nullptr, const XLineFilter& keep_line = nullptr);

// The same over a serialized XSpace held in memory (a converted trace's: a few bytes per event, where its parsed
// planes would take a few hundred); `name` names it in errors.
absl::Status read_xspace_planes(std::string_view bytes, std::string_view name,
                                const std::function<absl::Status(tensorflow::profiler::XPlane&)>& on_plane,
                                XSpaceHeader* header = nullptr, const XLineFilter& keep_line = nullptr);

}  // namespace podscope::xspace
