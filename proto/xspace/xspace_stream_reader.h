// Reads an XSpace file one plane at a time, so a reader never holds the whole parsed XSpace (whose heap
// is several times the file size). Follows the XSpace wire format: field 1 = planes, 2 = errors,
// 3 = warnings, 4 = hostnames; anything else is skipped.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
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

// Calls `on_plane` for every plane in file order; the plane is freed when it returns. Lines that
// `keep_line` rejects are left out without parsing their events. Stops at the first error, from the file
// (named with the byte offset where the wire format broke) or from `on_plane`.
absl::Status read_xspace_planes(const std::filesystem::path& path,
                                const std::function<absl::Status(const tensorflow::profiler::XPlane&)>& on_plane,
                                XSpaceHeader* header = nullptr, const XLineFilter& keep_line = nullptr);

}  // namespace podscope::xspace
