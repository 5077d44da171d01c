// Writes a file so that readers see either the old content or the whole new one: a temporary file in the
// same directory, fsync, rename over the target, fsync the directory. Parent directories are created.
#pragma once

#include <filesystem>
#include <string_view>

#include "absl/status/status.h"

namespace podscope {

absl::Status write_file_atomically(const std::filesystem::path& path, std::string_view data);

}  // namespace podscope
