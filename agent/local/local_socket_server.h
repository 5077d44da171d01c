// The agent's Unix socket for annotated processes (served on the agent's Asio io_context). Checks each
// peer's credentials (SO_PEERCRED) at accept, negotiates the protocol version (a Hello answered by Welcome
// or Refused; a version-1 client registers without one), reads frames, hands registrations and capture
// data to the ClientRegistry and step batches to a handler. A malformed or oversized frame, or one the
// connection's version does not have, closes that connection with a log line; nothing a client sends can
// stop the agent.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/status/status.h"
#include "agent/local/client_registry.h"
#include "proto/local/frame_codec.h"

namespace podscope::agent {

struct LocalSocketConfig {
  std::string path;
  std::string group;                // the socket's group ("" keeps the agent's); the mode is always 0660
  std::vector<uid_t> trusted_uids;  // trusted besides root and the agent's own uid
  bool trust_group_members = true;  // peers whose primary gid is the socket's group are trusted too
  uint32_t max_frame_bytes = local::kMaxFramePayloadBytes;
  size_t max_queued_bytes_per_client = 1u << 20;  // a client that stops reading past this is dropped
};

class LocalSocketServer {
 public:
  // Called on an io thread with each batch of finished steps and the sender's pid.
  using StepsHandler = std::function<void(int32_t pid, const local::StepsMsg& steps)>;

  LocalSocketServer(boost::asio::io_context& io, LocalSocketConfig config, ClientRegistry& registry,
                    StepsHandler on_steps);
  ~LocalSocketServer();

  // Creates the socket (replacing a stale file, refusing one a live agent still serves), sets its mode
  // and group, and starts accepting.
  absl::Status start();
  // Stops accepting, closes every connection and removes the socket file.
  void stop();

  class Connection;

 private:
  void accept();
  // An accept that fails (EMFILE, ENFILE: out of descriptors) is retried after a pause, not at once: retrying
  // at once would spin a core until a descriptor frees up.
  void accept_after_failure(const boost::system::error_code& ec);
  bool trusted(uid_t uid, gid_t gid) const;

  boost::asio::io_context& io_;
  LocalSocketConfig config_;
  ClientRegistry& registry_;
  StepsHandler on_steps_;
  gid_t socket_gid_ = static_cast<gid_t>(-1);
  std::unique_ptr<boost::asio::local::stream_protocol::acceptor> acceptor_;
  boost::asio::steady_timer accept_retry_;
  uint64_t accept_failures_ = 0;  // io thread only
  std::mutex mu_;
  std::set<std::shared_ptr<Connection>> connections_;
};

}  // namespace podscope::agent
