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

// How a daemon words the refusals of confine_to_root for its callers.
struct ConfinementRefusals {
  std::string_view no_root;         // FailedPrecondition when no root is configured: the daemon writes no files
  absl::StatusCode outside_code;    // when the path resolves outside the root...
  std::string_view outside_prefix;  // ...this, then resolve_within_root's message naming both paths
};
// The one check of a client-requested directory: a root must be configured, and `requested` resolves inside it.
absl::StatusOr<std::filesystem::path> confine_to_root(const std::filesystem::path& root,
                                                      const std::filesystem::path& requested,
                                                      const ConfinementRefusals& refusals);

}  // namespace podscope
