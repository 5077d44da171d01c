#include "daemon/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

namespace podscope {
namespace {
absl::Status errno_error(std::string_view what, const std::filesystem::path& path) {
  return absl::InternalError(std::string(what) + " " + path.string() + ": " + std::strerror(errno));
}
}  // namespace

absl::Status write_file_atomically(const std::filesystem::path& path, std::string_view data, Durability durability) {
  const bool synced = durability == Durability::kSynced;
  const std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError("creating directory " + dir.string() + ": " + ec.message());
  std::string temp = path.string() + ".tmp.XXXXXX";
  const int fd = mkstemp(temp.data());
  if (fd < 0) return errno_error("creating a temporary file for", path);
  auto fail = [&](std::string_view what) {
    absl::Status s = errno_error(what, temp);
    close(fd);
    unlink(temp.c_str());
    return s;
  };
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("writing");
    }
    written += static_cast<size_t>(n);
  }
  if (fchmod(fd, 0644) != 0) return fail("setting the mode of");
  if (synced && fsync(fd) != 0) return fail("syncing");
  if (close(fd) != 0) {
    unlink(temp.c_str());
    return errno_error("closing", temp);
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status s = errno_error("renaming into", path);
    unlink(temp.c_str());
    return s;
  }
  if (!synced) return absl::OkStatus();
  // The rename is durable once the directory entry is.
  if (const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  return absl::OkStatus();
}

}  // namespace podscope
