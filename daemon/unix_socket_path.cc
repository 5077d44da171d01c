#include "daemon/unix_socket_path.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace podscope {

absl::Status remove_stale_socket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError("socket path " + path + ": " + std::strerror(errno));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError("socket path " + path + " exists and is not a socket; not removing it");
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError("socket path " + path + " is longer than " +
                                      std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(std::string("socket(): ") + std::strerror(errno));
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  const int err = errno;
  close(fd);
  if (live) return absl::AlreadyExistsError("socket " + path + " is served by another process (is an agent running?)");
  if (err != ECONNREFUSED && err != ENOENT) {
    return absl::FailedPreconditionError("socket path " + path + ": connect: " + std::strerror(err));
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError("removing stale socket " + path + ": " + std::strerror(errno));
  }
  return absl::OkStatus();
}

}  // namespace podscope
