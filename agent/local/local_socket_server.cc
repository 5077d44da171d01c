#include "agent/local/local_socket_server.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <deque>
#include <filesystem>
#include <optional>

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include "daemon/log.h"

namespace podscope::agent {

namespace asio = boost::asio;
using asio::local::stream_protocol;

class LocalSocketServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(stream_protocol::socket socket, LocalSocketServer& server, int32_t pid)
      : socket_(std::move(socket)), server_(server), pid_(pid) {}

  stream_protocol::socket::executor_type executor() { return socket_.get_executor(); }
  void start(uint64_t id) {
    id_ = id;
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
  void read_header() {
    asio::async_read(socket_, asio::buffer(header_), [self = shared_from_this()](auto ec, size_t) {
      if (ec) return self->close(ec == asio::error::eof ? "" : ec.message());
      std::string error;
      // Before negotiation every frame this agent knows may come (Hello or a version-1 Register).
      const uint32_t version = self->version_ != 0 ? self->version_ : local::kProtocolVersion;
      auto h = local::decode_header(std::string_view(self->header_.data(), self->header_.size()), version, error,
                                    self->server_.config_.max_frame_bytes);
      if (!h) return self->close("malformed frame: " + error);
      self->type_ = h->type;
      self->payload_.resize(h->payload_bytes);
      self->read_payload();
    });
  }
  void read_payload() {
    asio::async_read(socket_, asio::buffer(payload_), [self = shared_from_this()](auto ec, size_t) {
      if (ec) return self->close(ec == asio::error::eof ? "" : ec.message());
      std::string error;
      auto msg = local::decode_payload(self->type_, self->payload_, error);
      if (!msg) return self->close("malformed frame: " + error);
      if (!self->dispatch(std::move(*msg))) return;
      self->read_header();
    });
  }
  bool dispatch(local::Message&& msg) {
    ClientRegistry& registry = server_.registry_;
    if (auto* hello = std::get_if<local::HelloMsg>(&msg)) return negotiate(*hello);
    if (auto* r = std::get_if<local::RegisterMsg>(&msg)) {
      if (!registration_version_ok(r->version)) return false;
      r->pid = pid_;  // the kernel's word (SO_PEERCRED) over the client's
      registry.on_register(id_, *r);
      registered_ = true;
      return true;
    }
    if (!registered_) {
      close("sent data before registering");
      return false;
    }
    if (auto* s = std::get_if<local::StepsMsg>(&msg)) {
      if (server_.on_steps_) server_.on_steps_(pid_, *s);
    } else if (auto* e = std::get_if<local::EventsMsg>(&msg)) {
      registry.on_events(id_, std::move(*e));
    } else if (auto* d = std::get_if<local::CaptureDoneMsg>(&msg)) {
      registry.on_capture_done(id_, *d);
    } else if (auto* p = std::get_if<local::DevicePlanesMsg>(&msg)) {
      registry.on_device_planes(id_, std::move(*p));
    } else {
      close("sent an agent-to-client frame");
      return false;
    }
    return true;
  }
  // The first frame: picks the newest version both ends speak and answers Welcome, or answers Refused and
  // closes once it is written.
  bool negotiate(const local::HelloMsg& hello) {
    if (version_ != 0) {
      close("sent a Hello after protocol version " + std::to_string(version_) + " was set");
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
    close(version_ != 0 ? "registered with protocol version " + std::to_string(version) + " after negotiating " +
                              std::to_string(version_)
                        : "protocol version " + std::to_string(version) + " without a Hello (this agent serves " +
                              served_versions() + "; versions after 1 negotiate with a Hello first)");
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
  void close(const std::string& reason) {
    if (!socket_.is_open()) return;
    if (!reason.empty()) {
      PODSCOPE_LOG(kWarning) << "closing local client pid " << pid_ << ": " << reason;
    }
    boost::system::error_code ignored;
    socket_.close(ignored);
    server_.registry_.remove_connection(id_);
    std::lock_guard lock(server_.mu_);
    server_.connections_.erase(shared_from_this());
  }

  stream_protocol::socket socket_;
  LocalSocketServer& server_;
  int32_t pid_;
  uint64_t id_ = 0;
  bool registered_ = false;
  uint32_t version_ = 0;             // negotiated (or registered without a Hello); 0 before
  bool close_when_written_ = false;  // refused: close once the answer is out
  std::array<char, local::kFrameHeaderBytes> header_{};
  local::FrameType type_ = local::FrameType::kRegister;
  std::string payload_;
  std::deque<std::string> outgoing_;
  size_t queued_bytes_ = 0;
};

LocalSocketServer::LocalSocketServer(asio::io_context& io, LocalSocketConfig config, ClientRegistry& registry,
                                     StepsHandler on_steps)
    : io_(io), config_(std::move(config)), registry_(registry), on_steps_(std::move(on_steps)), accept_retry_(io) {}

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
  if (!config_.group.empty()) {
    const group* g = ::getgrnam(config_.group.c_str());
    if (!g) return absl::InvalidArgumentError("socket_group: no group named '" + config_.group + "'");
    socket_gid_ = g->gr_gid;
  }
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
  if (socket_gid_ != static_cast<gid_t>(-1) &&
      ::chown(config_.path.c_str(), static_cast<uid_t>(-1), socket_gid_) != 0) {
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
  }
  for (auto& c : connections) c->close_from_anywhere("");
}

bool LocalSocketServer::trusted(uid_t uid, gid_t gid) const {
  if (uid == 0 || uid == ::geteuid()) return true;
  for (uid_t t : config_.trusted_uids)
    if (t == uid) return true;
  return config_.trust_group_members && socket_gid_ != static_cast<gid_t>(-1) && gid == socket_gid_;
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
    {
      ucred cred{};
      socklen_t len = sizeof(cred);
      if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        PODSCOPE_LOG(kWarning) << "local socket: cannot read peer credentials; closing the connection";
      } else if (!trusted(cred.uid, cred.gid)) {
        PODSCOPE_LOG(kWarning) << "local socket: dropping pid " << cred.pid << " uid " << cred.uid
                               << ": uid not trusted (root, the agent's uid, socket_trusted_uids, socket_group)";
      } else {
        auto conn = std::make_shared<Connection>(std::move(socket), *this, cred.pid);
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
        }
        asio::post(conn->executor(), [conn, id] { conn->start(id); });
      }
    }
    accept();
  });
}

}  // namespace podscope::agent
