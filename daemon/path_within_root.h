// Confinement of client-chosen paths: TF's Profile/NewSession let a remote client name where files go;
// podscope writes only inside a root its operator configured. Shared by the agent, the coordinator and the
// CLI (files a coordinator streams to it).
#pragma once

#include <filesystem>
#include <string_view>

#include "absl/status/statusor.h"

namespace podscope {

// True for a name that is exactly one path component: not empty, not "." or "..", no '/' and no control character
// (NUL, where the system would cut the name; newline, ESC...). Session ids and file names from clients must pass it.
bool is_plain_path_component(std::string_view name);

// Resolves `requested` (relative to `root`, or absolute) with `..` and symlinks followed as far as the
// path exists. Returns the canonical path, or PermissionDenied naming both paths when it lies outside `root`.
// A path with a NUL in it is InvalidArgument.
absl::StatusOr<std::filesystem::path> resolve_within_root(const std::filesystem::path& root,
                                                          const std::filesystem::path& requested);

}  // namespace podscope
