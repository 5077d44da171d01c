#include "client/agent_link.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace podscope::client {

void AgentLink::try_connect(SteadyTime now) {
  if (fd_ >= 0 || now < next_try_) return;
  sockaddr_un addr{};
  if (path_.size() >= sizeof(addr.sun_path)) return;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.data(), path_.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    next_try_ = now + backoff_;
    backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(1000));
    return;
  }
  fd_ = fd;
  backoff_ = std::chrono::milliseconds(50);
  out_.clear();
  out_sent_ = 0;
  in_.clear();
  if (std::exchange(speak_version1_next_, false)) {
    version_ = 1;
    new_connection_ = true;
  } else {
    encode(local::HelloMsg{local::kProtocolVersion, local::kOldestProtocolVersion});
  }
}

void AgentLink::disconnect() { close_for(backoff_); }

void AgentLink::close_for(std::chrono::milliseconds retry_after) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  version_ = 0;
  new_connection_ = false;
  out_.clear();
  out_sent_ = 0;
  in_.clear();
  next_try_ = std::chrono::steady_clock::now() + retry_after;
}

void AgentLink::queue(const local::Message& msg) {
  if (connected() && local::version_has(version_, local::type_of(msg))) encode(msg);
}

void AgentLink::encode(const local::Message& msg) {
  if (out_sent_ > 0 && out_sent_ == out_.size()) {
    out_.clear();
    out_sent_ = 0;
  }
  local::encode_frame(msg, out_);
  if (queued_bytes() > max_queued_) disconnect();  // the agent stopped reading: drop, never block
}

bool AgentLink::negotiate(const local::Message& msg) {
  if (const auto* welcome = std::get_if<local::WelcomeMsg>(&msg)) {
    if (welcome->version < local::kOldestProtocolVersion || welcome->version > local::kProtocolVersion) {
      std::fprintf(stderr, "podscope: the agent at %s chose protocol version %u, which was not offered (%u..%u)\n",
                   path_.c_str(), welcome->version, local::kOldestProtocolVersion, local::kProtocolVersion);
      close_for(kRefusedRetry);
      return false;
    }
    version_ = welcome->version;
    new_connection_ = true;
    return true;
  }
  if (const auto* refused = std::get_if<local::RefusedMsg>(&msg)) {
    std::fprintf(stderr,
                 "podscope: the agent at %s refused protocol versions %u..%u (it serves %u..%u): %s; annotations stay "
                 "off, retrying in %lld s\n",
                 path_.c_str(), local::kOldestProtocolVersion, local::kProtocolVersion, refused->min_version,
                 refused->max_version, refused->reason.c_str(), static_cast<long long>(kRefusedRetry.count()));
    close_for(kRefusedRetry);
    return false;
  }
  disconnect();  // anything else before the answer breaks the protocol
  return false;
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
  bool agent_gone = false;
  if (p.revents & (POLLIN | POLLHUP | POLLERR)) agent_gone = !read_available();
  // What arrived before a close still counts: a Refused comes right before one.
  if (!decode_frames(incoming)) return;
  if (agent_gone) {
    // Closed on our Hello without an answer: the agent predates negotiation; speak version 1 to it at once.
    const bool hello_unanswered = version_ == 0;
    disconnect();
    if (hello_unanswered) {
      speak_version1_next_ = true;
      next_try_ = std::chrono::steady_clock::now();
    }
  }
}

bool AgentLink::read_available() {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);  // otherwise EOF or an error
  }
}

bool AgentLink::decode_frames(std::vector<local::Message>& incoming) {
  size_t at = 0;
  std::string error;
  while (in_.size() - at >= local::kFrameHeaderBytes) {
    const uint32_t version = version_ != 0 ? version_ : local::kProtocolVersion;
    auto header = local::decode_header(std::string_view(in_).substr(at, local::kFrameHeaderBytes), version, error);
    if (!header) {
      disconnect();
      return false;
    }
    if (in_.size() - at - local::kFrameHeaderBytes < header->payload_bytes) break;
    auto msg = local::decode_payload(
        header->type, std::string_view(in_).substr(at + local::kFrameHeaderBytes, header->payload_bytes), error);
    if (!msg) {
      disconnect();
      return false;
    }
    at += local::kFrameHeaderBytes + header->payload_bytes;
    if (version_ == 0) {
      if (!negotiate(*msg)) return false;
    } else {
      incoming.push_back(std::move(*msg));
    }
  }
  in_.erase(0, at);
  return true;
}

}  // namespace podscope::client
