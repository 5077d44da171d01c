// The client's end of the agent's Unix socket, used only by the background thread: connects with a
// backoff (50 ms doubling, capped at 1 s), negotiates the protocol version, writes queued frames with
// MSG_DONTWAIT|MSG_NOSIGNAL, reads the agent's frames. An agent that stops reading (queue over its cap) or
// sends garbage is disconnected.
//
// Negotiation: each connection starts with a Hello offering [kOldestProtocolVersion, kProtocolVersion]. An
// agent answers Welcome (the version) or Refused (logged to stderr; retried after kRefusedRetry, the agent
// may be upgraded meanwhile). An agent older than negotiation closes the connection on the Hello: the next
// connection then speaks version 1, which has no Hello, and the one after a later disconnect offers again.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
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

  // How long a client waits after a refusal before it offers its versions again.
  static constexpr std::chrono::seconds kRefusedRetry{10};

  // Connects when not connected and the backoff allows, and starts the negotiation.
  void try_connect(SteadyTime now);
  // Connected and negotiated: frames of version() may be queued.
  bool connected() const { return fd_ >= 0 && version_ != 0; }
  // True once after each negotiation that agreed a version: the caller registers then.
  bool take_new_connection() { return std::exchange(new_connection_, false); }
  // The negotiated version (0 while not connected).
  uint32_t version() const { return version_; }
  // Connected, negotiated or not: pump() has work.
  bool open() const { return fd_ >= 0; }
  void disconnect();
  // Queues one frame for sending; nothing is written until pump(). Frames the negotiated version does not
  // have are not sent.
  void queue(const local::Message& msg);
  // Writes what the socket accepts, then waits up to `timeout_ms` for agent frames and appends them to
  // `incoming` (the negotiation's own frames excepted). Disconnects on EOF, socket errors, bad frames or an
  // overfull queue.
  void pump(int timeout_ms, std::vector<local::Message>& incoming);
  size_t queued_bytes() const { return out_.size() - out_sent_; }
  const std::string& socket_path() const { return path_; }

 private:
  void write_some();
  // Appends what the socket has to in_; false when the agent closed it (or it failed).
  bool read_available();
  // Decodes the complete frames in in_: negotiation frames handled, the rest appended to `incoming`.
  // False when the connection was closed on the way.
  bool decode_frames(std::vector<local::Message>& incoming);
  void encode(const local::Message& msg);
  // Handles a Welcome or Refused; false (after disconnecting) for anything else while negotiating.
  bool negotiate(const local::Message& msg);
  // Closes the connection; the next try waits for `retry_after`.
  void close_for(std::chrono::milliseconds retry_after);

  std::string path_;
  size_t max_queued_;
  int fd_ = -1;
  uint32_t version_ = 0;
  bool new_connection_ = false;
  bool speak_version1_next_ = false;  // the last Hello was closed unanswered: the agent predates negotiation
  std::chrono::milliseconds backoff_{50};
  SteadyTime next_try_{};
  std::string out_;
  size_t out_sent_ = 0;
  std::string in_;
};

}  // namespace podscope::client
