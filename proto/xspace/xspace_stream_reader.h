// Reads an XSpace file one plane at a time, so a reader never holds the whole parsed XSpace (whose heap
// is several times the file size). Follows the XSpace wire format: field 1 = planes, 2 = errors,
// 3 = warnings, 4 = hostnames; anything else is skipped.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
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

// Calls `on_plane` for every plane in file order; the plane is reused afterwards. Stops at the first
// error, from the file (named with the byte offset where the wire format broke) or from `on_plane`.
absl::Status read_xspace_planes(const std::filesystem::path& path,
                                const std::function<absl::Status(const tensorflow::profiler::XPlane&)>& on_plane,
                                XSpaceHeader* header = nullptr);

}  // namespace podscope::xspace
