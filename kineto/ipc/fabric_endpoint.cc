#include "kineto/ipc/fabric_endpoint.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <utility>

#include "kineto/ipc/fabric_message.h"

namespace podscope::kineto::ipc {
namespace {

constexpr size_t kPathOffset = offsetof(sockaddr_un, sun_path);

std::string errno_text() { return std::strerror(errno); }

// A datagram socket file is live when a connect to it succeeds: someone has it bound.
bool socket_file_is_live(const FabricAddress& address) {
  const int probe = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return false;
  const bool live = ::connect(probe, reinterpret_cast<const sockaddr*>(&address.address), address.length) == 0;
  ::close(probe);
  return live;
}

// Removes a socket file no one serves; refuses a live one and anything that is not a socket.
absl::Status claim_socket_file(const FabricAddress& address) {
  struct stat st {};
  if (::lstat(address.file.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(address.description + ": " + errno_text());
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(address.description + " exists and is not a socket; left alone");
  }
  if (socket_file_is_live(address)) {
    return absl::AlreadyExistsError(address.description + " is taken: another daemon (dynolog?) serves it");
  }
  if (::unlink(address.file.c_str()) != 0) {
    return absl::FailedPreconditionError("removing the stale " + address.description + ": " + errno_text());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FabricAddress> fabric_address(std::string_view endpoint) {
  FabricAddress out;
  out.address.sun_family = AF_UNIX;
  constexpr size_t kPathBytes = sizeof(out.address.sun_path);
  if (endpoint.empty()) return absl::InvalidArgumentError("the endpoint name is empty");
  if (endpoint.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("the endpoint name contains a NUL byte");
  }
  if (endpoint.front() == '/') {
    // A file socket: the path and its terminating NUL.
    if (endpoint.size() + 1 > kPathBytes) {
      return absl::InvalidArgumentError("socket path '" + std::string(endpoint) + "' is longer than " +
                                        std::to_string(kPathBytes - 1) + " bytes");
    }
    if (endpoint.back() == '/') {
      return absl::InvalidArgumentError("socket path '" + std::string(endpoint) + "' names a directory");
    }
    std::memcpy(out.address.sun_path, endpoint.data(), endpoint.size());
    out.length = static_cast<socklen_t>(kPathOffset + endpoint.size() + 1);
    out.file = std::string(endpoint);
    out.description = "socket file " + out.file;
    return out;
  }
  if (endpoint.find('/') != std::string_view::npos) {
    return absl::InvalidArgumentError("endpoint '" + std::string(endpoint) +
                                      "' must be a name (abstract socket) or an absolute path (socket file)");
  }
  // An abstract name: a leading NUL, the name and a trailing NUL, all part of the address as Kineto spells it.
  if (endpoint.size() + 2 > kPathBytes) {
    return absl::InvalidArgumentError("abstract socket name '" + std::string(endpoint) + "' is longer than " +
                                      std::to_string(kPathBytes - 2) + " bytes");
  }
  std::memcpy(out.address.sun_path + 1, endpoint.data(), endpoint.size());
  out.length = static_cast<socklen_t>(kPathOffset + endpoint.size() + 2);
  out.description = "abstract socket @" + std::string(endpoint);
  return out;
}

absl::StatusOr<FabricEndpoint> FabricEndpoint::bind(const FabricAddress& address) {
  if (!address.file.empty()) {
    if (absl::Status s = claim_socket_file(address); !s.ok()) return s;
  }
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket: " + errno_text());
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address.address), address.length) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EADDRINUSE) {
      return absl::AlreadyExistsError(address.description + " is taken: another daemon (dynolog?) serves it");
    }
    return absl::FailedPreconditionError("binding " + address.description + ": " + std::strerror(error));
  }
  // Kineto processes of every user poll the daemon, as they do dynolog's socket.
  if (!address.file.empty()) ::chmod(address.file.c_str(), 0666);
  // The kernel attaches each sender's pid, uid and gid to what it receives.
  const int on = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
    const int error = errno;
    ::close(fd);
    if (!address.file.empty()) ::unlink(address.file.c_str());
    return absl::InternalError("SO_PASSCRED on " + address.description + ": " + std::strerror(error));
  }
  return FabricEndpoint(fd, address.file);
}

FabricEndpoint::FabricEndpoint(FabricEndpoint&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), file_(std::move(other.file_)) {
  other.file_.clear();
}

FabricEndpoint& FabricEndpoint::operator=(FabricEndpoint&& other) noexcept {
  if (this != &other) {
    this->~FabricEndpoint();
    fd_ = std::exchange(other.fd_, -1);
    file_ = std::move(other.file_);
    other.file_.clear();
  }
  return *this;
}

FabricEndpoint::~FabricEndpoint() {
  if (fd_ >= 0) ::close(fd_);
  if (!file_.empty()) ::unlink(file_.c_str());
}

bool FabricEndpoint::wait_readable(int timeout_ms) const {
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) > 0 && (p.revents & POLLIN) != 0;
}

std::optional<Datagram> FabricEndpoint::receive() const {
  Datagram d;
  d.bytes.resize(kMaxMessageBytes + 1);
  iovec data{d.bytes.data(), d.bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
  msghdr m{};
  m.msg_name = &d.from;
  m.msg_namelen = sizeof(d.from);
  m.msg_iov = &data;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(fd_, &m, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
  if (n < 0) return std::nullopt;
  d.from_length = m.msg_namelen;
  d.length = static_cast<size_t>(n);
  d.bytes.resize(std::min(d.length, d.bytes.size()));
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof(ucred))) {
      ucred cred{};
      std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
      d.sender = Sender{cred.pid, cred.uid, cred.gid};
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      // Descriptors a sender passed along: the buffer leaves no room for them, but none is ever kept.
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (fd >= 0) ::close(fd);
      }
    }
  }
  return d;
}

bool FabricEndpoint::answer(const Datagram& to, std::string_view message) const {
  if (to.from_length <= sizeof(sa_family_t)) return false;  // an unbound sender has no address to answer
  const ssize_t n = ::sendto(fd_, message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&to.from), to.from_length);
  return n == static_cast<ssize_t>(message.size());
}

}  // namespace podscope::kineto::ipc
