#include "agent/local/local_socket_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <deque>
#include <filesystem>
#include <optional>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include "daemon/log.h"
#include "proto/xspace/utf8.h"

namespace podscope::agent {

namespace asio = boost::asio;
using asio::local::stream_protocol;

namespace {

// A program or job name as a client registers it reaches Prometheus labels, GetStatus's proto fields and log lines:
// from here on it is valid UTF-8 (xspace::valid_utf8) without control characters (C0, DEL, C1), each made '?'.
std::string registered_name(std::string_view text) {
  const std::string valid = xspace::valid_utf8(text);
  std::string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size(); ++i) {
    const auto c = static_cast<unsigned char>(valid[i]);
    const bool c1 = c == 0xC2 && i + 1 < valid.size() && static_cast<unsigned char>(valid[i + 1]) <= 0x9F;
    if (c < 0x20 || c == 0x7F || c1) {
      out += '?';
      i += c1 ? 1 : 0;
    } else {
      out += valid[i];
    }
  }
  return out;
}

}  // namespace

// Between frames a connection keeps a payload buffer up to this size; a larger one is released.
constexpr size_t kRetainedPayloadBytes = 64u << 10;

class LocalSocketServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(stream_protocol::socket socket, LocalSocketServer& server, int32_t pid, uid_t uid)
      : socket_(std::move(socket)), deadline_(socket_.get_executor()), server_(server), pid_(pid), uid_(uid) {}

  stream_protocol::socket::executor_type executor() { return socket_.get_executor(); }
  void start(uint64_t id) {
    id_ = id;
    // read_arrived reads what the kernel said is there; should it not be, the read must say so, not block the loop.
    boost::system::error_code ignored;
    socket_.non_blocking(true, ignored);
    expire_after(Deadline::kRegistration);
    read_header();
  }
  // Thread-safe: queues a frame for this connection's strand.
  void send(std::string frame) {
    asio::post(socket_.get_executor(),
               [self = shared_from_this(), frame = std::move(frame)]() mutable { self->write(std::move(frame)); });
  }
  void close_from_anywhere(std::string reason) {
    asio::post(socket_.get_executor(),
               [self = shared_from_this(), reason = std::move(reason)] { self->close(reason); });
  }

 private:
  // Closes the connection as idle unless the deadline is moved or cancelled first. Before registration the
  // deadline runs from accept; after it, only while a frame is arriving: a quiet registered client stays.
  enum class Deadline { kRegistration, kFrame };
  void expire_after(Deadline deadline) {
    const LocalSocketLimits& limits = server_.config_.limits;
    const int64_t timeout_ms =
        deadline == Deadline::kRegistration ? limits.handshake_timeout_ms : limits.frame_timeout_ms;
    deadline_.expires_after(std::chrono::milliseconds(timeout_ms));
    deadline_.async_wait([self = shared_from_this(), deadline, timeout_ms](const boost::system::error_code& ec) {
      if (ec) return;
      self->refuse(LocalRefusal::kIdleTimeout, deadline == Deadline::kRegistration
                                                   ? "did not register within " + std::to_string(timeout_ms) + " ms"
                                                   : "a frame of " + std::to_string(self->payload_bytes_) +
                                                         " bytes stalled for " + std::to_string(timeout_ms) + " ms");
    });
  }
  void read_header() {
    asio::async_read(socket_, asio::buffer(header_), [self = shared_from_this()](auto ec, size_t) {
      if (ec) return self->close(ec == asio::error::eof ? "" : ec.message());
      std::string error;
      // Before negotiation every frame this agent knows may come (Hello or a version-1 Register).
      const uint32_t version = self->version_ != 0 ? self->version_ : local::kProtocolVersion;
      auto h = local::decode_header(std::string_view(self->header_.data(), self->header_.size()), version, error,
                                    self->server_.config_.max_frame_bytes);
      if (!h) return self->refuse(LocalRefusal::kMalformed, "malformed frame: " + error);
      if (self->registered_) self->expire_after(Deadline::kFrame);
      self->type_ = h->type;
      self->payload_bytes_ = h->payload_bytes;
      self->payload_.clear();
      self->payload_.reserve(h->payload_bytes);  // address space only: pages are touched as bytes arrive
      self->read_payload();
    });
  }
  // Reads the payload as it arrives, the buffer growing by the bytes that came: a header that declares a large
  // frame, or a frame that stalls, holds only what was sent.
  void read_payload() {
    if (payload_.size() == payload_bytes_) return finish_frame();
    socket_.async_wait(stream_protocol::socket::wait_read, [self = shared_from_this()](auto ec) {
      if (ec) return self->close(ec.message());
      self->read_arrived();
    });
  }
  void read_arrived() {
    boost::system::error_code ec;
    const size_t received = payload_.size();
    // At least one byte, so that an end of stream (nothing available) is read as one.
    const size_t arrived = std::max<size_t>(socket_.available(ec), 1);
    payload_.resize(received + std::min(arrived, payload_bytes_ - received));
    const size_t n = socket_.read_some(asio::buffer(payload_.data() + received, payload_.size() - received), ec);
    payload_.resize(received + n);
    if (ec == asio::error::would_block) ec = {};
    if (ec) return close(ec == asio::error::eof ? "" : ec.message());
    read_payload();
  }
  void finish_frame() {
    std::string error;
    auto msg = local::decode_payload(type_, payload_, error);
    release_payload();
    if (!msg) return refuse(LocalRefusal::kMalformed, "malformed frame: " + error);
    if (!dispatch(std::move(*msg))) return;
    if (registered_) deadline_.cancel();  // the frame is whole (or the handshake is done)
    read_header();
  }
  void release_payload() {
    if (payload_.capacity() > kRetainedPayloadBytes) {
      std::string().swap(payload_);
    } else {
      payload_.clear();
    }
  }
  bool dispatch(local::Message&& msg) {
    ClientRegistry& registry = server_.registry_;
    if (auto* hello = std::get_if<local::HelloMsg>(&msg)) return negotiate(*hello);
    if (auto* r = std::get_if<local::RegisterMsg>(&msg)) {
      if (!registration_version_ok(r->version)) return false;
      r->pid = pid_;  // the kernel's word (SO_PEERCRED) over the client's
      r->program = registered_name(r->program);
      r->job = registered_name(r->job);
      registry.on_register(id_, *r);
      job_ = r->job;
      if (!registered_) server_.counters_.add_registered(1);
      registered_ = true;
      return true;
    }
    if (!registered_) {
      refuse(LocalRefusal::kMalformed, "sent data before registering");
      return false;
    }
    if (auto* s = std::get_if<local::StepsMsg>(&msg)) {
      if (server_.on_steps_) server_.on_steps_(pid_, job_, *s);
    } else if (auto* e = std::get_if<local::EventsMsg>(&msg)) {
      registry.on_events(id_, std::move(*e));
    } else if (auto* stages = std::get_if<local::InputStagesMsg>(&msg)) {
      registry.on_input_stages(id_, std::move(*stages));
    } else if (auto* allocations = std::get_if<local::AllocationsMsg>(&msg)) {
      registry.on_allocations(id_, std::move(*allocations));
    } else if (auto* d = std::get_if<local::CaptureDoneMsg>(&msg)) {
      registry.on_capture_done(id_, *d);
    } else if (auto* p = std::get_if<local::DevicePlanesMsg>(&msg)) {
      registry.on_device_planes(id_, std::move(*p));
    } else if (auto* server = std::get_if<local::ProfilerServerMsg>(&msg)) {
      registry.on_profiler_server(id_, *server);
    } else {
      refuse(LocalRefusal::kMalformed, "sent an agent-to-client frame");
      return false;
    }
    return true;
  }
  // The first frame: picks the newest version both ends speak and answers Welcome, or answers Refused and
  // closes once it is written.
  bool negotiate(const local::HelloMsg& hello) {
    if (version_ != 0) {
      refuse(LocalRefusal::kMalformed, "sent a Hello after protocol version " + std::to_string(version_) + " was set");
      return false;
    }
    const std::optional<uint32_t> version =
        local::common_version(hello, local::kOldestProtocolVersion, local::kProtocolVersion);
    if (!version) {
      const std::string reason = "it speaks protocol versions " + std::to_string(hello.min_version) + ".." +
                                 std::to_string(hello.max_version) + ", this agent serves " + served_versions();
      PODSCOPE_LOG(kWarning) << "refusing local client pid " << pid_ << ": " << reason;
      write(frame(local::RefusedMsg{local::kOldestProtocolVersion, local::kProtocolVersion, reason}));
      close_when_written_ = true;
      return false;
    }
    version_ = *version;
    write(frame(local::WelcomeMsg{version_}));
    return true;
  }
  // A Register follows a Welcome at its version, or comes first from a client of a version without Hello.
  bool registration_version_ok(uint32_t version) {
    if (version_ == 0 && version >= local::kOldestProtocolVersion && version <= local::kProtocolVersion &&
        !local::version_has(version, local::FrameType::kHello)) {
      version_ = version;
      return true;
    }
    if (version_ != 0 && version == version_) return true;
    refuse(LocalRefusal::kMalformed, version_ != 0 ? "registered with protocol version " + std::to_string(version) +
                                                         " after negotiating " + std::to_string(version_)
                                                   : "protocol version " + std::to_string(version) +
                                                         " without a Hello (this agent serves " + served_versions() +
                                                         "; versions after 1 negotiate with a Hello first)");
    return false;
  }
  static std::string served_versions() {
    return std::to_string(local::kOldestProtocolVersion) + ".." + std::to_string(local::kProtocolVersion);
  }
  static std::string frame(const local::Message& msg) {
    std::string out;
    local::encode_frame(msg, out);
    return out;
  }
  // On the strand: queues a frame and starts writing.
  void write(std::string frame) {
    if (!socket_.is_open()) return;
    queued_bytes_ += frame.size();
    if (queued_bytes_ > server_.config_.max_queued_bytes_per_client) {
      close("it stopped reading (" + std::to_string(queued_bytes_) + " bytes queued)");
      return;
    }
    outgoing_.push_back(std::move(frame));
    if (outgoing_.size() == 1) write_next();
  }
  void write_next() {
    asio::async_write(socket_, asio::buffer(outgoing_.front()), [self = shared_from_this()](auto ec, size_t n) {
      if (ec) return self->close(ec.message());
      self->queued_bytes_ -= n;
      self->outgoing_.pop_front();
      if (!self->outgoing_.empty()) {
        self->write_next();
      } else if (self->close_when_written_) {
        self->close("");
      }
    });
  }
  // Closes the connection for a reason the server counts (and logs, rate-limited).
  void refuse(LocalRefusal reason, const std::string& what) {
    if (!socket_.is_open()) return;
    server_.refuse(reason,
                   "closing local client pid " + std::to_string(pid_) + " uid " + std::to_string(uid_) + ": " + what);
    shut();
  }
  void close(const std::string& reason) {
    if (!socket_.is_open()) return;
    if (!reason.empty()) {
      PODSCOPE_LOG(kWarning) << "closing local client pid " << pid_ << ": " << reason;
    }
    shut();
  }
  void shut() {
    boost::system::error_code ignored;
    deadline_.cancel();
    socket_.close(ignored);
    release_payload();
    server_.registry_.remove_connection(id_);
    if (registered_) server_.counters_.add_registered(-1);
    server_.forget(shared_from_this(), uid_);
  }

  stream_protocol::socket socket_;
  asio::steady_timer deadline_;
  LocalSocketServer& server_;
  int32_t pid_;
  uid_t uid_;
  uint64_t id_ = 0;
  bool registered_ = false;
  std::string job_;                  // as registered
  uint32_t version_ = 0;             // negotiated (or registered without a Hello); 0 before
  bool close_when_written_ = false;  // refused: close once the answer is out
  std::array<char, local::kFrameHeaderBytes> header_{};
  local::FrameType type_ = local::FrameType::kRegister;
  size_t payload_bytes_ = 0;  // the current frame's, as its header declared
  std::string payload_;       // its bytes received so far
  std::deque<std::string> outgoing_;
  size_t queued_bytes_ = 0;
};

LocalSocketServer::LocalSocketServer(asio::io_context& io, LocalSocketConfig config, ClientRegistry& registry,
                                     LocalSocketCounters& counters, StepsHandler on_steps)
    : io_(io),
      config_(std::move(config)),
      registry_(registry),
      counters_(counters),
      on_steps_(std::move(on_steps)),
      accept_retry_(io) {}

LocalSocketServer::~LocalSocketServer() { stop(); }

absl::Status LocalSocketServer::start() {
  namespace fs = std::filesystem;
  const fs::path path(config_.path);
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (fs::exists(fs::symlink_status(path, ec))) {
    if (!fs::is_socket(fs::symlink_status(path, ec))) {
      return absl::FailedPreconditionError("local socket path " + config_.path + " exists and is not a socket");
    }
    stream_protocol::socket probe(io_);
    boost::system::error_code connect_ec;
    probe.connect(stream_protocol::endpoint(config_.path), connect_ec);
    if (!connect_ec) {
      return absl::AlreadyExistsError("local socket " + config_.path + " is served by a running process");
    }
    fs::remove(path, ec);  // stale: left by an agent that died
  }
  absl::StatusOr<gid_t> gid = socket_group_id(config_.group);
  if (!gid.ok()) return absl::InvalidArgumentError("socket_group: " + std::string(gid.status().message()));
  socket_gid_ = *gid;
  boost::system::error_code bind_ec;
  acceptor_ = std::make_unique<stream_protocol::acceptor>(io_);
  acceptor_->open(stream_protocol(), bind_ec);
  if (!bind_ec) acceptor_->bind(stream_protocol::endpoint(config_.path), bind_ec);
  if (!bind_ec) acceptor_->listen(asio::socket_base::max_listen_connections, bind_ec);
  if (bind_ec) {
    acceptor_.reset();
    return absl::UnavailableError("cannot listen on local socket " + config_.path + ": " + bind_ec.message());
  }
  if (::chmod(config_.path.c_str(), 0660) != 0) {
    return absl::InternalError("cannot chmod 0660 local socket " + config_.path);
  }
  if (!config_.group.empty() && ::chown(config_.path.c_str(), static_cast<uid_t>(-1), socket_gid_) != 0) {
    return absl::PermissionDeniedError("cannot give local socket " + config_.path + " to group '" + config_.group +
                                       "'");
  }
  PODSCOPE_LOG(kInfo) << "local socket listening on " << config_.path;
  accept();
  return absl::OkStatus();
}

void LocalSocketServer::stop() {
  accept_retry_.cancel();
  if (acceptor_) {
    boost::system::error_code ignored;
    acceptor_->close(ignored);
    acceptor_.reset();
    std::error_code ec;
    std::filesystem::remove(config_.path, ec);
  }
  std::set<std::shared_ptr<Connection>> connections;
  {
    std::lock_guard lock(mu_);
    connections.swap(connections_);
    connections_per_uid_.clear();
    counters_.set_connections(0);
  }
  for (auto& c : connections) c->close_from_anywhere("");
}

// Trusted: root, the agent's uid, socket_trusted_uids, and members of the socket's group, by primary or
// supplementary group (those the kernel recorded for the peer at connect, SO_PEERGROUPS).
bool LocalSocketServer::trusted(int fd, uid_t uid, gid_t gid) const {
  if (uid == 0 || uid == ::geteuid() || gid == socket_gid_) return true;
  for (uid_t t : config_.trusted_uids)
    if (t == uid) return true;
  std::vector<gid_t> groups(64);
  for (;;) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      break;
    }
    if (errno != ERANGE || len / sizeof(gid_t) <= groups.size()) return false;
    groups.resize(len / sizeof(gid_t));  // the kernel said how many there are
  }
  return std::find(groups.begin(), groups.end(), socket_gid_) != groups.end();
}

std::optional<LocalRefusal> LocalSocketServer::over_cap(uid_t uid) const {
  if (static_cast<int64_t>(connections_.size()) >= config_.limits.max_connections) return LocalRefusal::kTotalCap;
  const auto it = connections_per_uid_.find(uid);
  if (it != connections_per_uid_.end() && it->second >= config_.limits.max_connections_per_uid) {
    return LocalRefusal::kUidCap;
  }
  return std::nullopt;
}

void LocalSocketServer::forget(const std::shared_ptr<Connection>& connection, uid_t uid) {
  std::lock_guard lock(mu_);
  if (connections_.erase(connection) == 0) return;  // stop() took it
  auto it = connections_per_uid_.find(uid);
  if (it != connections_per_uid_.end() && --it->second <= 0) connections_per_uid_.erase(it);
  counters_.set_connections(connections_.size());
}

void LocalSocketServer::refuse(LocalRefusal reason, const std::string& what) {
  counters_.refused(reason);
  uint64_t held_back = 0;
  {
    std::lock_guard lock(mu_);
    RefusalLog& log = refusal_log_[static_cast<size_t>(reason)];
    const auto now = std::chrono::steady_clock::now();
    if (log.last_line != std::chrono::steady_clock::time_point{} && now - log.last_line < std::chrono::seconds(1)) {
      ++log.held_back;
      return;
    }
    log.last_line = now;
    held_back = std::exchange(log.held_back, 0);
  }
  PODSCOPE_LOG(kWarning) << "local socket: " << what << " [" << refusal_name(reason) << "]"
                         << (held_back > 0 ? "; " + std::to_string(held_back) + " more like it in the last second"
                                           : std::string());
}

void LocalSocketServer::accept_after_failure(const boost::system::error_code& ec) {
  // One line for the first failure of a run and then every 100th, so a long descriptor shortage is visible
  // without flooding the log.
  if (accept_failures_++ % 100 == 0) {
    PODSCOPE_LOG(kWarning) << "local socket: accept failed (" << ec.message() << "), retrying in 100 ms; "
                           << accept_failures_ << " failure(s) so far";
  }
  accept_retry_.expires_after(std::chrono::milliseconds(100));
  accept_retry_.async_wait([this](const boost::system::error_code& wait_ec) {
    if (!wait_ec) accept();
  });
}

void LocalSocketServer::accept() {
  if (!acceptor_) return;
  acceptor_->async_accept(asio::make_strand(io_), [this](boost::system::error_code ec, stream_protocol::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_) return;
    if (ec) return accept_after_failure(ec);
    admit(std::move(socket));
    accept();
  });
}

void LocalSocketServer::admit(stream_protocol::socket socket) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    PODSCOPE_LOG(kWarning) << "local socket: cannot read peer credentials; closing the connection";
    return;
  }
  const std::string peer = "pid " + std::to_string(cred.pid) + " uid " + std::to_string(cred.uid);
  if (!trusted(socket.native_handle(), cred.uid, cred.gid)) {
    return refuse(LocalRefusal::kUntrusted,
                  "dropping " + peer + ": not trusted (root, the agent's uid, socket_trusted_uids, socket_group)");
  }
  // Only this accept chain adds connections, so the caps checked here still hold when it inserts below.
  std::optional<LocalRefusal> cap;
  {
    std::lock_guard lock(mu_);
    cap = over_cap(cred.uid);
  }
  if (cap) {
    return refuse(
        *cap, "dropping " + peer + ": " +
                  (*cap == LocalRefusal::kTotalCap
                       ? std::to_string(config_.limits.max_connections) + " connections open (socket_max_connections)"
                       : std::to_string(config_.limits.max_connections_per_uid) +
                             " connections open for its uid (socket_max_connections_per_uid)"));
  }
  auto conn = std::make_shared<Connection>(std::move(socket), *this, cred.pid, cred.uid);
  std::weak_ptr<Connection> weak = conn;
  const uint64_t id = registry_.add_connection(
      cred.pid, cred.uid,
      [weak](std::string frame) {
        if (auto c = weak.lock()) c->send(std::move(frame));
      },
      [weak] {
        if (auto c = weak.lock()) c->close_from_anywhere("hung (no answer to a capture close)");
      });
  {
    std::lock_guard lock(mu_);
    connections_.insert(conn);
    ++connections_per_uid_[cred.uid];
    counters_.set_connections(connections_.size());
  }
  asio::post(conn->executor(), [conn, id] { conn->start(id); });
}

}  // namespace podscope::agent
