// Hosts that take a connection and never answer: one listener on every loopback address (127.1.x.y) that never
// accepts, as a host whose agent hangs, or a network that drops what it is sent past the handshake.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace podscope::testing {

class SilentHosts {
 public:
  SilentHosts() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t length = sizeof(address);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || listen(fd_, 4096) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw std::runtime_error("silent listener failed");
    }
    port_ = ntohs(address.sin_port);
  }
  ~SilentHosts() { close(fd_); }
  SilentHosts(const SilentHosts&) = delete;
  SilentHosts& operator=(const SilentHosts&) = delete;

  // `count` addresses 127.1.x.y:port, all of them this listener.
  std::vector<std::string> hosts(int count) const {
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) {
      out.push_back("127.1." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) + ":" +
                    std::to_string(port_));
    }
    return out;
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace podscope::testing
