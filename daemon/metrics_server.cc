#include "daemon/metrics_server.h"

#include <prometheus/text_serializer.h>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "daemon/log.h"

namespace podscope {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// At the limit a new connection replaces the oldest one that has not sent a whole request: a scraper sends its
// request at once, so only connections that hold a slot without asking anything are pushed out.
constexpr size_t kMaxConnections = 64;
constexpr size_t kMaxRequestBytes = 8192;
constexpr std::chrono::milliseconds kRequestTimeout{1000};  // from accept to the end of the request's headers
constexpr std::chrono::milliseconds kWriteTimeout{10000};   // from the request to the answer's last byte

// 1700000000123456789 → "2023-11-14T22:13:20Z".
std::string utc_time(int64_t ns) {
  const std::time_t seconds = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm;
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

// Every answer closes its connection: a scraper opens one per scrape, and no idle keep-alive holds a slot.
std::string http_answer(int status, const char* content_type, const std::string& body, bool with_body) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
                    "\r\nContent-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n\r\n";
  if (with_body) out += body;
  return out;
}

// Binds and listens on "host:port" ("[v6]:port" too; an empty or "*" host is every IPv4 address).
absl::StatusOr<int> listen_on(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("expected host:port");
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = listen.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_family = host.empty() || host == "*" ? AF_INET : AF_UNSPEC;
  addrinfo* found = nullptr;
  const int resolved = getaddrinfo(host.empty() || host == "*" ? nullptr : host.c_str(), port.c_str(), &hints, &found);
  if (resolved != 0) return absl::InvalidArgumentError(gai_strerror(resolved));
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    freeaddrinfo(found);
    return absl::UnavailableError(std::strerror(errno));
  }
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  const bool bound = bind(fd, found->ai_addr, found->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0;
  const int error = errno;
  freeaddrinfo(found);
  if (!bound) {
    close(fd);
    return absl::UnavailableError(std::strerror(error));
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

}  // namespace

struct MetricsServer::Connection {
  int fd = -1;
  SteadyTime accepted;
  SteadyTime deadline;
  std::string request;  // read so far, until the headers end
  std::string answer;   // queued once the request is in
  size_t written = 0;
  bool answering() const { return !answer.empty(); }
};

MetricsServer::MetricsServer(std::shared_ptr<prometheus::Registry> registry,
                             std::vector<const HealthCheck*> health_checks)
    : registry_(std::move(registry)), health_checks_(std::move(health_checks)) {}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& listen,
                                                                    std::shared_ptr<prometheus::Registry> registry,
                                                                    std::vector<const HealthCheck*> health_checks,
                                                                    const prometheus::Labels& labels) {
  absl::StatusOr<int> listen_fd = listen_on(listen);
  if (!listen_fd.ok()) {
    return absl::UnavailableError("metrics_listen " + listen +
                                  ": cannot listen: " + std::string(listen_fd.status().message()));
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer(std::move(registry), std::move(health_checks)));
  server->listen_fd_ = *listen_fd;
  server->port_ = bound_port(*listen_fd);
  server->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  auto& closed = prometheus::BuildCounter()
                     .Name("podscope_metrics_connections_closed_total")
                     .Help("Connections to the metrics server closed at one of its bounds, by reason.")
                     .Labels(labels)
                     .Register(*server->registry_);
  server->closed_ = {&closed.Add({{"reason", "request_timeout"}}), &closed.Add({{"reason", "write_timeout"}}),
                     &closed.Add({{"reason", "request_too_large"}}), &closed.Add({{"reason", "evicted_at_limit"}})};
  server->thread_ = std::thread([raw = server.get()] { raw->serve(); });
  return server;
}

MetricsServer::~MetricsServer() {
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) {
    PODSCOPE_LOG(kWarning) << "metrics server: cannot wake its thread";
  }
  thread_.join();
  close(wake_fd_);
  close(listen_fd_);
}

void MetricsServer::serve() {
  std::vector<Connection> connections;
  std::vector<pollfd> polled;
  while (true) {
    polled.assign({{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}});
    SteadyTime next_deadline = SteadyTime::max();
    for (const Connection& c : connections) {
      polled.push_back({c.fd, static_cast<short>(c.answering() ? POLLOUT : POLLIN), 0});
      next_deadline = std::min(next_deadline, c.deadline);
    }
    int timeout_ms = -1;
    if (next_deadline != SteadyTime::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - std::chrono::steady_clock::now());
      timeout_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    if (poll(polled.data(), polled.size(), timeout_ms) < 0 && errno != EINTR) {
      PODSCOPE_LOG(kError) << "metrics server: poll failed: " << std::strerror(errno);
      break;
    }
    if (polled[0].revents != 0) break;
    // Served before new ones are accepted, so a connection the limit pushes out is never one with a request in.
    const SteadyTime now = std::chrono::steady_clock::now();
    std::vector<Connection> open;
    open.reserve(connections.size());
    for (size_t i = 0; i < connections.size(); ++i) {
      Connection& c = connections[i];
      const short events = polled[i + 2].revents;
      bool keep = true;
      if (events != 0) keep = c.answering() ? write_answer(c) : read_request(c);
      if (keep && now >= c.deadline) {
        (c.answering() ? closed_.write_timeout : closed_.request_timeout)->Increment();
        keep = false;
      }
      if (keep) {
        open.push_back(std::move(c));
      } else {
        close(c.fd);
      }
    }
    connections = std::move(open);
    if (polled[1].revents != 0) accept_connections(connections);
  }
  for (const Connection& c : connections) close(c.fd);
}

void MetricsServer::accept_connections(std::vector<Connection>& connections) {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: all taken; anything else is the peer's trouble, retried on the next poll
    if (connections.size() >= kMaxConnections) {
      closed_.evicted_at_limit->Increment();
      auto oldest_waiting = connections.end();
      for (auto it = connections.begin(); it != connections.end(); ++it) {
        if (!it->answering() && (oldest_waiting == connections.end() || it->accepted < oldest_waiting->accepted)) {
          oldest_waiting = it;
        }
      }
      if (oldest_waiting == connections.end()) {  // every slot is sending an answer: the newcomer is turned away
        close(fd);
        continue;
      }
      close(oldest_waiting->fd);
      connections.erase(oldest_waiting);
    }
    Connection& added = connections.emplace_back();
    added.fd = fd;
    added.accepted = std::chrono::steady_clock::now();
    added.deadline = added.accepted + kRequestTimeout;
  }
}

bool MetricsServer::read_request(Connection& connection) {
  char buffer[4096];
  const ssize_t n = read(connection.fd, buffer, sizeof buffer);
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  if (n == 0) return false;  // the peer left before asking
  connection.request.append(buffer, static_cast<size_t>(n));
  const size_t head_end = connection.request.find("\r\n\r\n");
  if (head_end == std::string::npos && connection.request.size() > kMaxRequestBytes) {
    closed_.request_too_large->Increment();
    connection.answer = http_answer(431, "text/plain; charset=utf-8", "request too large\n", true);
  } else if (head_end == std::string::npos) {
    return true;
  } else {
    connection.answer = answer(connection.request.substr(0, head_end));
  }
  connection.request.clear();
  connection.deadline = std::chrono::steady_clock::now() + kWriteTimeout;
  return write_answer(connection);
}

bool MetricsServer::write_answer(Connection& connection) {
  while (connection.written < connection.answer.size()) {
    const ssize_t n = send(connection.fd, connection.answer.data() + connection.written,
                           connection.answer.size() - connection.written, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    connection.written += static_cast<size_t>(n);
  }
  shutdown(connection.fd, SHUT_WR);
  // What the peer sent past the request (a refused oversized one) is discarded, so the close does not reset the
  // connection before the answer is read; a few reads, as the answer is already on its way.
  char discarded[4096];
  for (int i = 0; i < 16 && read(connection.fd, discarded, sizeof discarded) > 0; ++i) {}
  return false;
}

// The answer to a request's head ("GET /metrics HTTP/1.1\r\nHost: ..."): GET and HEAD of /metrics and /healthz.
std::string MetricsServer::answer(const std::string& request_head) const {
  const size_t method_end = request_head.find(' ');
  const size_t path_end = method_end == std::string::npos ? std::string::npos : request_head.find(' ', method_end + 1);
  if (path_end == std::string::npos) return http_answer(400, "text/plain; charset=utf-8", "bad request\n", true);
  const std::string method = request_head.substr(0, method_end);
  std::string path = request_head.substr(method_end + 1, path_end - method_end - 1);
  path = path.substr(0, path.find('?'));
  const bool with_body = method != "HEAD";
  if (method != "GET" && method != "HEAD") {
    return http_answer(405, "text/plain; charset=utf-8", "only GET and HEAD\n", true);
  }
  if (path == "/metrics")
    return http_answer(200, "text/plain; version=0.0.4; charset=utf-8", metrics_body(), with_body);
  if (path == "/healthz") {
    int status = 200;
    const std::string body = health_body(status);
    return http_answer(status, "text/plain; charset=utf-8", body, with_body);
  }
  return http_answer(404, "text/plain; charset=utf-8", "not found\n", with_body);
}

std::string MetricsServer::metrics_body() const { return prometheus::TextSerializer().Serialize(registry_->Collect()); }

std::string MetricsServer::health_body(int& status) const {
  std::string failing;
  for (const HealthCheck* check : health_checks_) {
    if (std::optional<HealthFailure> failure = check->failure()) {
      std::string why = failure->why;
      std::replace(why.begin(), why.end(), '\n', ' ');  // one line per check
      failing += std::string(check->name()) + ": " + why + " (since " + utc_time(failure->since_ns) + ")\n";
    }
  }
  status = failing.empty() ? 200 : 503;
  return failing.empty() ? "ok\n" : failing;
}

}  // namespace podscope
