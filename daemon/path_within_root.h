// Confinement of client-chosen paths: TF's Profile/NewSession let a remote client name where files go;
// podscope writes only inside a root its operator configured. Shared by the agent and the coordinator.
#pragma once

#include <filesystem>

#include "absl/status/statusor.h"

namespace podscope {

// Resolves `requested` (relative to `root`, or absolute) with `..` and symlinks followed as far as the
// path exists. Returns the canonical path, or PermissionDenied naming both paths when it lies outside `root`.
absl::StatusOr<std::filesystem::path> resolve_within_root(const std::filesystem::path& root,
                                                          const std::filesystem::path& requested);

}  // namespace podscope
