#include "client/agent_link.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace podscope::client {

bool AgentLink::try_connect(SteadyTime now) {
  if (fd_ >= 0 || now < next_try_) return false;
  sockaddr_un addr{};
  if (path_.size() >= sizeof(addr.sun_path)) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.data(), path_.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    next_try_ = now + backoff_;
    backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(1000));
    return false;
  }
  fd_ = fd;
  backoff_ = std::chrono::milliseconds(50);
  out_.clear();
  out_sent_ = 0;
  in_.clear();
  return true;
}

void AgentLink::disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  out_.clear();
  out_sent_ = 0;
  in_.clear();
  next_try_ = std::chrono::steady_clock::now() + backoff_;
}

void AgentLink::queue(const local::Message& msg) {
  if (fd_ < 0) return;
  if (out_sent_ > 0 && out_sent_ == out_.size()) {
    out_.clear();
    out_sent_ = 0;
  }
  local::encode_frame(msg, out_);
  if (queued_bytes() > max_queued_) disconnect();  // the agent stopped reading: drop, never block
}

void AgentLink::write_some() {
  while (fd_ >= 0 && out_sent_ < out_.size()) {
    const ssize_t n = ::send(fd_, out_.data() + out_sent_, out_.size() - out_sent_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      out_sent_ += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      disconnect();
      return;
    }
  }
  if (out_sent_ == out_.size()) {
    out_.clear();
    out_sent_ = 0;
  }
}

void AgentLink::pump(int timeout_ms, std::vector<local::Message>& incoming) {
  write_some();
  if (fd_ < 0) return;
  pollfd p{fd_, static_cast<short>(POLLIN | (queued_bytes() > 0 ? POLLOUT : 0)), 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return;
  if (p.revents & POLLOUT) write_some();
  if (fd_ < 0) return;
  if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        in_.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      disconnect();  // EOF or error: the agent went away
      return;
    }
  }
  size_t at = 0;
  std::string error;
  while (in_.size() - at >= local::kFrameHeaderBytes) {
    auto header = local::decode_header(std::string_view(in_).substr(at, local::kFrameHeaderBytes), error);
    if (!header) {
      disconnect();
      return;
    }
    if (in_.size() - at - local::kFrameHeaderBytes < header->payload_bytes) break;
    auto msg = local::decode_payload(
        header->type, std::string_view(in_).substr(at + local::kFrameHeaderBytes, header->payload_bytes), error);
    if (!msg) {
      disconnect();
      return;
    }
    incoming.push_back(std::move(*msg));
    at += local::kFrameHeaderBytes + header->payload_bytes;
  }
  in_.erase(0, at);
}

}  // namespace podscope::client
