// What remote requests may write under repository_root (repository_quota_mb): the captures Profile writes and the
// pod runs NewSession writes, whoever asks. Each write is charged what it adds: its files' bytes, and each directory
// it had to make at least kDirectoryCharge (a directory costs an inode and a line in every listing, which its few
// KiB on disk do not say). A write is refused while what the agent wrote since it started and is still there holds
// the quota; before refusing, the writes are looked at again, so what an operator deleted makes room. A refusal
// names the bound, and is counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"

namespace podscope::agent {

class RepositoryQuota {
 public:
  static constexpr size_t kDirectoryCharge = size_t{1} << 20;

  // `on_refused` (may be empty) counts each refusal.
  RepositoryQuota(size_t quota_bytes, std::function<void()> on_refused = {})
      : quota_bytes_(quota_bytes), on_refused_(std::move(on_refused)) {}

  // The directories a write into `dir` has to make: the topmost of them (empty: none) and how many.
  struct PlannedWrite {
    std::filesystem::path topmost_made;
    size_t directories = 0;
  };
  // Before writing a file or a run into `dir`: what the write will make, or RESOURCE_EXHAUSTED naming
  // repository_quota_mb and what the agent's writes hold.
  absl::StatusOr<PlannedWrite> admit(const std::filesystem::path& dir);
  // After it: `written` (the file, or the run's directory) holds `bytes`.
  void charge(const PlannedWrite& planned, const std::filesystem::path& written, uint64_t bytes);

  size_t held_bytes() const;

 private:
  struct Write {
    std::filesystem::path where;  // a directory it made, or its file when it made none
    size_t charge = 0;
  };
  // Forgets the writes whose files an operator removed (mu_ held).
  void forget_removed();

  const size_t quota_bytes_;
  const std::function<void()> on_refused_;
  mutable std::mutex mu_;
  std::vector<Write> writes_;
  size_t held_ = 0;
};

}  // namespace podscope::agent
