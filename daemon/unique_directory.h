// Run directories are named by the second they start (TensorFlow's YYYY_MM_DD_HH_MM_SS); two captures in the same
// second, or a reused session id, must not share one and overwrite each other's files.
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace podscope {

// Creates `parent/name` (and `parent` as needed) and returns it; when it already exists, creates and returns the
// first free `parent/name_N` (N = 1, 2, ...). Creation is the claim (mkdir is atomic), so concurrent callers get
// distinct directories. Fails naming the path when the parent cannot be created or written.
absl::StatusOr<std::filesystem::path> create_unique_directory(const std::filesystem::path& parent,
                                                              const std::string& name);

}  // namespace podscope
