// Writes a file so that readers see either the old content or the whole new one: a temporary file in the
// same directory, renamed over the target. Parent directories are created.
#pragma once

#include <filesystem>
#include <string_view>

#include "absl/status/status.h"

namespace podscope {

enum class Durability {
  // The file and its directory entry are synced before the call returns: the file survives a crash.
  kSynced,
  // Not synced, which costs a device write per file: a crash may leave the file empty or missing. For files made
  // again from synced ones (the analysis outputs of a run: `podscope analyze` writes them anew).
  kRebuildable,
};

absl::Status write_file_atomically(const std::filesystem::path& path, std::string_view data,
                                   Durability durability = Durability::kSynced);

}  // namespace podscope
