// The daemon's end of the IPC fabric: a Unix datagram socket bound either in the abstract namespace (Kineto's
// default: the name plus its terminating NUL, as Kineto spells the address) or as a file socket (Kineto's
// KINETO_IPC_SOCKET_DIR=<dir> sends to <dir>/<name>). Non-blocking; answers go to each datagram's sender. Every
// datagram comes with its sender's credentials as the kernel states them (SO_PASSCRED): whatever a payload claims,
// the sending process is the one named there.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace podscope::kineto::ipc {

struct FabricAddress {
  sockaddr_un address{};
  socklen_t length = 0;
  std::string file;         // the socket file; empty for an abstract name
  std::string description;  // "abstract socket @dynolog" or "socket file /run/x/dynolog"
};

// `endpoint` is a name (abstract socket) or an absolute path (file socket, for processes started with
// KINETO_IPC_SOCKET_DIR set to its directory and the daemon name as its file name).
absl::StatusOr<FabricAddress> fabric_address(std::string_view endpoint);

// Who sent a datagram, in the receiver's namespaces: pid 0 when the sender's pid is not visible from the
// receiver's pid namespace.
struct Sender {
  int32_t pid = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
};

struct Datagram {
  std::string bytes;  // at most kMaxMessageBytes + 1: a longer datagram is cut, `length` says so
  size_t length = 0;  // the datagram's full length
  sockaddr_un from{};
  socklen_t from_length = 0;
  std::optional<Sender> sender;  // the kernel's SCM_CREDENTIALS; absent only if the kernel attached none
};

class FabricEndpoint {
 public:
  // Binds the address. A file socket left by a dead daemon is removed first; a live one, or an abstract name
  // already bound, is an error saying the endpoint is taken.
  static absl::StatusOr<FabricEndpoint> bind(const FabricAddress& address);

  FabricEndpoint(FabricEndpoint&& other) noexcept;
  FabricEndpoint& operator=(FabricEndpoint&& other) noexcept;
  FabricEndpoint(const FabricEndpoint&) = delete;
  FabricEndpoint& operator=(const FabricEndpoint&) = delete;
  ~FabricEndpoint();  // closes the socket and removes its file

  // Waits up to `timeout_ms` for a datagram; false when none came.
  bool wait_readable(int timeout_ms) const;
  // The next datagram, or nothing when none is queued.
  std::optional<Datagram> receive() const;
  // Sends `message` to a datagram's sender without blocking; false when it cannot (no address, gone, full).
  bool answer(const Datagram& to, std::string_view message) const;

 private:
  FabricEndpoint(int fd, std::string file) : fd_(fd), file_(std::move(file)) {}
  int fd_ = -1;
  std::string file_;
};

}  // namespace podscope::kineto::ipc
