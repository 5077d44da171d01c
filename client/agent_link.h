// The client's end of the agent's Unix socket, used only by the background thread: connects with a
// backoff (50 ms doubling, capped at 1 s), writes queued frames with MSG_DONTWAIT|MSG_NOSIGNAL, reads the
// agent's frames. An agent that stops reading (queue over its cap) or sends garbage is disconnected.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "proto/local/frame_codec.h"

namespace podscope::client {

class AgentLink {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  explicit AgentLink(std::string socket_path, size_t max_queued_bytes = 64u << 20)
      : path_(std::move(socket_path)), max_queued_(max_queued_bytes) {}
  ~AgentLink() { disconnect(); }
  AgentLink(const AgentLink&) = delete;
  AgentLink& operator=(const AgentLink&) = delete;

  // Connects when not connected and the backoff allows. True when a new connection was made.
  bool try_connect(SteadyTime now);
  bool connected() const { return fd_ >= 0; }
  void disconnect();
  // Queues one frame for sending; nothing is written until pump().
  void queue(const local::Message& msg);
  // Writes what the socket accepts, then waits up to `timeout_ms` for agent frames and appends them to
  // `incoming`. Disconnects on EOF, socket errors, bad frames or an overfull queue.
  void pump(int timeout_ms, std::vector<local::Message>& incoming);
  size_t queued_bytes() const { return out_.size() - out_sent_; }
  const std::string& socket_path() const { return path_; }

 private:
  void write_some();

  std::string path_;
  size_t max_queued_;
  int fd_ = -1;
  std::chrono::milliseconds backoff_{50};
  SteadyTime next_try_{};
  std::string out_;
  size_t out_sent_ = 0;
  std::string in_;
};

}  // namespace podscope::client
