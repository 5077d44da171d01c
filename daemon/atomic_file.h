// Writes a file so that readers see either the old content or the whole new one: a temporary file in the
// same directory (`<name>.tmp.<writer's pid>.XXXXXX`), renamed over the target. Parent directories are created.
// A writer killed between the two leaves its temporary file behind: sweep_interrupted_writes removes those.
#pragma once

#include <cstdint>
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

// What sweep_interrupted_writes removed.
struct SweptWrites {
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t directories = 0;  // left empty by their removal (a run that held nothing else)
};

// Removes every temporary file under `root` whose writer is gone (no process has its pid; one of a writer that
// predates the pid in the name), and each directory that held nothing else. At a daemon's start, before it writes:
// those files count against no cap and hold disk until removed, and a run directory left holding only one is listed
// by TensorBoard as a run.
SweptWrites sweep_interrupted_writes(const std::filesystem::path& root);

}  // namespace podscope
