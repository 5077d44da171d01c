// A TCP listener whose connections the kernel completes and nobody accepts: a wedged server from a client's side, a
// host whose agent hangs, an address a test watches for dials.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace podscope::testing {

class NeverAcceptingListener {
 public:
  // On `ip` ("0.0.0.0": every address) and a free port, with room for `backlog` completed connections.
  explicit NeverAcceptingListener(const std::string& ip = "127.0.0.1", int backlog = 64) : ip_(ip) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    socklen_t length = sizeof(address);
    if (inet_pton(AF_INET, ip.c_str(), &address.sin_addr) != 1 ||
        bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || listen(fd_, backlog) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      close(fd_);
      throw std::runtime_error("cannot listen on " + ip);
    }
    port_ = ntohs(address.sin_port);
  }
  ~NeverAcceptingListener() { close(fd_); }
  NeverAcceptingListener(const NeverAcceptingListener&) = delete;
  NeverAcceptingListener& operator=(const NeverAcceptingListener&) = delete;

  int port() const { return port_; }
  std::string address() const { return ip_ + ":" + std::to_string(port_); }
  // True when anything connected within `wait`.
  bool contacted(std::chrono::milliseconds wait) const {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, static_cast<int>(wait.count())) > 0;
  }

 private:
  std::string ip_;
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace podscope::testing
