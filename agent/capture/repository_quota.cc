#include "agent/capture/repository_quota.h"

#include <system_error>

namespace podscope::agent {
namespace {

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

absl::StatusOr<RepositoryQuota::PlannedWrite> RepositoryQuota::admit(const std::filesystem::path& dir) {
  PlannedWrite planned;
  for (std::filesystem::path at = dir; !at.empty(); at = at.parent_path()) {
    std::error_code error;
    if (std::filesystem::exists(at, error) || at == at.parent_path()) break;
    planned.topmost_made = at;
    ++planned.directories;
  }
  const size_t needed = planned.directories * kDirectoryCharge;
  std::lock_guard lock(mu_);
  if (held_ + needed >= quota_bytes_) forget_removed();
  if (held_ + needed < quota_bytes_) return planned;
  if (on_refused_) on_refused_();
  return absl::ResourceExhaustedError(
      "not written to disk: what remote requests wrote under repository_root since the agent started holds " +
      mib(held_) + ", the agent's repository_quota_mb=" + std::to_string(quota_bytes_ >> 20) +
      " (each directory made counts at least 1 MiB); delete old runs, or raise the quota");
}

void RepositoryQuota::charge(const PlannedWrite& planned, const std::filesystem::path& written, uint64_t bytes) {
  const size_t charge = static_cast<size_t>(bytes) + planned.directories * kDirectoryCharge;
  std::lock_guard lock(mu_);
  writes_.push_back({planned.topmost_made.empty() ? written : planned.topmost_made, charge});
  held_ += charge;
}

void RepositoryQuota::forget_removed() {
  std::erase_if(writes_, [this](const Write& w) {
    std::error_code error;
    if (std::filesystem::exists(w.where, error) || error) return false;
    held_ -= w.charge;
    return true;
  });
}

size_t RepositoryQuota::held_bytes() const {
  std::lock_guard lock(mu_);
  return held_;
}

}  // namespace podscope::agent
