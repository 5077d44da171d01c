#include "daemon/unique_directory.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace podscope {
namespace {

// Far more than captures in one second; a bound keeps a full or hostile directory from making this spin.
constexpr int kMaxSuffix = 10'000;

}  // namespace

absl::StatusOr<std::filesystem::path> create_unique_directory(const std::filesystem::path& parent,
                                                              const std::string& name) {
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec)
    return absl::PermissionDeniedError("cannot create directory " + (parent / name).string() + ": " + ec.message());
  for (int suffix = 0; suffix <= kMaxSuffix; ++suffix) {
    const std::filesystem::path candidate = parent / (suffix == 0 ? name : name + "_" + std::to_string(suffix));
    if (::mkdir(candidate.c_str(), 0755) == 0) return candidate;
    if (errno != EEXIST) {
      return absl::PermissionDeniedError("cannot create directory " + candidate.string() + ": " + std::strerror(errno));
    }
  }
  return absl::ResourceExhaustedError("no free name for " + (parent / name).string() + " after " +
                                      std::to_string(kMaxSuffix) + " suffixes");
}

}  // namespace podscope
