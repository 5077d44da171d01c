#include "daemon/metrics_server.h"

#include <pthread.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <array>
#include <chrono>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <prometheus/counter.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/numbers.h"
#include "daemon/log.h"
#include "daemon/metrics_basic_auth.h"
#include "daemon/metrics_web_config.h"

namespace podscope {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

constexpr size_t kMaxConnections = 64;
constexpr size_t kMaxRequestHeadBytes = 8192;                  // request line and headers; past it: 431
constexpr std::chrono::seconds kRequestTimeout{5};             // from accept to the request's last header (TLS too)
constexpr std::chrono::seconds kWriteTimeout{10};              // from the request to the answer's last byte
constexpr std::chrono::seconds kCloseTimeout{1};               // TLS close_notify, and draining what the peer sent
constexpr size_t kMaxDrainedBytes = 64 << 10;                  // past a refused request, before the close
constexpr std::chrono::milliseconds kRenderShareWindow{1000};  // a render this young is shared by a new scrape
constexpr size_t kMaxHeldRenders = 2;                          // renders held by connections still sending them
constexpr std::chrono::seconds kWebConfigCheckPeriod{1};
// What the kernel may hold of an answer per connection (Linux doubles it). Unset, autotuning lets a socket queue up
// to tcp_wmem's maximum (4 MiB by default): a whole /metrics of a client that never reads would sit in kernel memory,
// where neither the connection limit nor the write timeout sees it; bounded, such an answer stays in progress here.
constexpr int kSendBufferBytes = 128 << 10;

constexpr char kTextPlain[] = "text/plain; charset=utf-8";
constexpr char kExposition[] = "text/plain; version=0.0.4; charset=utf-8";
// What an HTTPS port answers a plaintext HTTP request, as Go's servers (node_exporter's) do.
constexpr char kPlaintextOnTls[] =
    "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
    "Client sent an HTTP request to an HTTPS server.\n";

// 1700000000123456789 → "2023-11-14T22:13:20Z".
std::string utc_time(int64_t ns) {
  const std::time_t seconds = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm;
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// `text` as one gzip member (zlib; its fastest level: the exposition format compresses well at any level).
std::string gzip(std::string_view text) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);  // the bound leaves room for all of it
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The parts of `text` between `separator`s.
std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (size_t from = 0;;) {
    const size_t at = text.find(separator, from);
    parts.push_back(text.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from));
    if (at == std::string_view::npos) return parts;
    from = at + 1;
  }
}

// The weight of one Accept-Encoding element's parameters ("q=0.5"): 1 without one, 0 when it is not a number.
double weight(const std::vector<std::string_view>& parts) {
  double q = 1;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string_view param = trimmed(parts[i]);
    if (param.size() < 2 || (param[0] != 'q' && param[0] != 'Q') || param[1] != '=') continue;
    const std::string number(param.substr(2));
    char* end = nullptr;
    q = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0') q = 0;
  }
  return q;
}

// Whether an Accept-Encoding value ("gzip", "deflate, gzip;q=0.5", "*") lets the answer be gzipped.
bool accepts_gzip(std::string_view accept_encoding) {
  std::optional<double> gzip_q, any_q;
  for (std::string_view element : split(accept_encoding, ',')) {
    const std::vector<std::string_view> parts = split(element, ';');
    std::string coding(trimmed(parts[0]));
    std::transform(coding.begin(), coding.end(), coding.begin(), [](unsigned char c) { return std::tolower(c); });
    if (coding == "gzip" || coding == "x-gzip") gzip_q = weight(parts);
    if (coding == "*") any_q = weight(parts);
  }
  return gzip_q.has_value() ? *gzip_q > 0 : any_q.has_value() && *any_q > 0;
}

// A header's value as a std::string (Beast's views are Boost's).
std::string text_of(beast::string_view view) { return std::string(view.data(), view.size()); }

// One rendering of the registry, shared by the scrapes that overlap it.
struct Render {
  SteadyClock::time_point at;
  std::string text;
  std::string gzip;  // made by the first scrape that accepts it
};

// An answer; its body's bytes live in `owner` (a Render, or the string of a short answer).
struct Reply {
  http::response<http::span_body<const char>> message;
  std::shared_ptr<const void> owner;
};

std::shared_ptr<Reply> text_reply(http::status status, std::string body, bool head = false) {
  auto owner = std::make_shared<const std::string>(std::move(body));
  auto reply = std::make_shared<Reply>();
  reply->message.result(status);
  reply->message.set(http::field::content_type, kTextPlain);
  reply->message.content_length(owner->size());
  if (!head) reply->message.body() = {owner->data(), owner->size()};
  reply->owner = std::move(owner);
  return reply;
}

// What the answer to a request depends on, kept past the parser while a password is checked.
struct Asked {
  http::verb method;
  std::string path;  // the target without its query
  bool gzip;
  std::string authorization;
};

enum class Closed {
  kRequestTimeout,
  kWriteTimeout,
  kRequestTooLarge,
  kBadRequest,
  kEvictedAtLimit,
  kEvictedSlowReader,
  kTlsHandshakeFailed,
  kPlaintextOnTls,
  kCount
};
constexpr const char* kClosedReasons[] = {"request_timeout",      "write_timeout",    "request_too_large",
                                          "bad_request",          "evicted_at_limit", "evicted_slow_reader",
                                          "tls_handshake_failed", "plaintext_on_tls"};
static_assert(std::size(kClosedReasons) == static_cast<size_t>(Closed::kCount));

// What a connection is served with: the configuration in force when it was accepted.
struct Serving {
  std::shared_ptr<asio::ssl::context> tls;               // null: plain HTTP
  std::shared_ptr<const MetricsBasicAuth::Users> users;  // empty: no authentication
};

// A file's identity and content stamp: a change to any of them is a change of the file.
using FileStamp = std::tuple<dev_t, ino_t, off_t, int64_t, int64_t>;
std::vector<FileStamp> stamps_of(const std::vector<std::string>& files) {
  std::vector<FileStamp> out;
  for (const std::string& file : files) {
    struct stat st {};
    if (stat(file.c_str(), &st) != 0) st = {};
    out.emplace_back(st.st_dev, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  }
  return out;
}

class Connection;

}  // namespace

class MetricsServer::Impl {
 public:
  Impl(const MetricsServerSettings& settings, std::shared_ptr<prometheus::Registry> registry,
       std::vector<const HealthCheck*> health_checks);
  ~Impl();

  absl::Status load_web_config();
  absl::Status bind();
  void run();

  int port() const { return port_; }
  // As started: TLS stays on or off; users may come and go with the file.
  bool serves_tls() const { return serves_tls_; }
  bool requires_basic_auth() const { return started_with_users_; }

  // For connections, on the io thread.
  void count(Closed reason) { closed_[static_cast<size_t>(reason)]->Increment(); }
  void answer(const Asked& asked, const Serving& serving, std::function<void(std::shared_ptr<Reply>)> done);
  std::array<char, 16384>& discard() { return discard_; }

 private:
  void accept();
  void admit(tcp::socket socket);
  void refresh_web_config();
  std::shared_ptr<Reply> route(const Asked& asked);
  std::shared_ptr<Reply> metrics_reply(bool gzip, bool head);
  std::shared_ptr<Render> current_render();
  std::string health_body(http::status& status) const;

  const MetricsServerSettings settings_;
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::vector<const HealthCheck*> health_checks_;
  asio::io_context io_{1};
  tcp::acceptor acceptor_{io_};
  int port_ = 0;
  Serving serving_;
  bool serves_tls_ = false;
  bool started_with_users_ = false;
  std::vector<std::string> web_config_files_;
  std::vector<FileStamp> web_config_stamps_;
  SteadyClock::time_point web_config_checked_{};
  std::unique_ptr<MetricsBasicAuth> auth_;
  std::vector<std::weak_ptr<Connection>> connections_;
  std::vector<std::weak_ptr<Render>> renders_;  // newest last
  std::array<char, 16384> discard_{};           // where drained bytes go (one io thread: never read)
  std::array<prometheus::Counter*, static_cast<size_t>(Closed::kCount)> closed_{};
  prometheus::Counter* held_renders_served_ = nullptr;
  prometheus::Counter* unauthorized_no_credentials_ = nullptr;
  prometheus::Counter* unauthorized_wrong_credentials_ = nullptr;
  prometheus::Counter* unauthorized_busy_ = nullptr;
  prometheus::Counter* web_config_applied_ = nullptr;
  prometheus::Counter* web_config_failed_ = nullptr;
  std::thread thread_;
};

namespace {

using Server = MetricsServer::Impl;

// One accepted connection: its phase, and since when, decide which one the connection limit pushes out.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class Phase { kRequest, kAnswer, kClosing };
  virtual ~Connection() = default;
  virtual void start() = 0;
  // Closes the socket at once: every pending operation ends.
  virtual void abort() = 0;
  Phase phase() const { return phase_; }
  // When the connection was accepted, or when its answer began once it has a request in.
  SteadyClock::time_point since() const { return since_; }

 protected:
  void answering() {
    if (phase_ != Phase::kAnswer) since_ = SteadyClock::now();
    phase_ = Phase::kAnswer;
  }

  Phase phase_ = Phase::kRequest;
  SteadyClock::time_point since_ = SteadyClock::now();
};

// A connection over `Stream`: beast::tcp_stream (plain HTTP) or beast::ssl_stream of one (TLS).
template <typename Stream>
class Session final : public Connection {
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

 public:
  Session(Server& server, tcp::socket socket, Serving serving)
      : server_(server), serving_(std::move(serving)), stream_(make_stream(std::move(socket), serving_)) {
    parser_.header_limit(kMaxRequestHeadBytes);
  }

  void start() override {
    lowest().expires_at(since_ + kRequestTimeout);
    if constexpr (kTls) {
      beast::async_detect_ssl(lowest(), buffer_,
                              [self = shared()](beast::error_code ec, bool tls) { self->on_detected(ec, tls); });
    } else {
      read_request();
    }
  }

  void abort() override {
    aborted_ = true;
    lowest().close();
  }

 private:
  static Stream make_stream(tcp::socket socket, const Serving& serving) {
    if constexpr (kTls) {
      return Stream(beast::tcp_stream(std::move(socket)), *serving.tls);
    } else {
      return Stream(std::move(socket));
    }
  }
  std::shared_ptr<Session> shared() { return std::static_pointer_cast<Session>(shared_from_this()); }
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // The first bytes say whether the peer speaks TLS; a plaintext request is answered as Go's servers do.
  void on_detected(beast::error_code ec, bool tls) {
    if (ec) return end_early(ec);
    if (!tls) {
      server_.count(Closed::kPlaintextOnTls);
      answering();
      asio::async_write(lowest(), asio::buffer(kPlaintextOnTls, sizeof kPlaintextOnTls - 1),
                        [self = shared()](beast::error_code error, size_t) {
                          if (!error) self->drain_and_close();
                        });
      return;
    }
    if constexpr (kTls) {
      stream_.async_handshake(asio::ssl::stream_base::server, buffer_.data(),
                              [self = shared()](beast::error_code error, size_t used) {
                                if (error) {
                                  if (error != beast::error::timeout && !self->aborted_) {
                                    self->server_.count(Closed::kTlsHandshakeFailed);
                                  }
                                  return self->end_early(error);
                                }
                                self->buffer_.consume(used);
                                self->read_request();
                              });
    }
  }

  void read_request() {
    http::async_read(stream_, buffer_, parser_,
                     [self = shared()](beast::error_code ec, size_t) { self->on_request(ec); });
  }

  void on_request(beast::error_code ec) {
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      server_.count(Closed::kRequestTooLarge);
      return write(text_reply(http::status::request_header_fields_too_large, "request header fields too large\n"));
    }
    if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      server_.count(Closed::kBadRequest);
      return write(text_reply(http::status::bad_request, "bad request: " + ec.message() + "\n"));
    }
    if (ec) return end_early(ec);
    const http::request<http::empty_body>& request = parser_.get();
    const std::string target = text_of(request.target());
    Asked asked{request.method(), target.substr(0, target.find('?')),
                accepts_gzip(text_of(request[http::field::accept_encoding])),
                text_of(request[http::field::authorization])};
    answering();
    server_.answer(asked, serving_, [self = shared()](std::shared_ptr<Reply> reply) { self->write(std::move(reply)); });
  }

  void write(std::shared_ptr<Reply> reply) {
    if (aborted_) return;
    answering();
    reply->message.version(11);
    reply->message.keep_alive(false);
    lowest().expires_after(kWriteTimeout);
    http::async_write(stream_, reply->message, [self = shared(), reply](beast::error_code ec, size_t) {
      if (ec == beast::error::timeout) self->server_.count(Closed::kWriteTimeout);
      if (ec) return self->lowest().close();
      self->close();
    });
  }

  // The answer is out: TLS says close_notify, then what the peer still sends is read and dropped (briefly), so the
  // close does not reset the connection before the peer has read the answer.
  void close() {
    phase_ = Phase::kClosing;
    lowest().expires_after(kCloseTimeout);
    if constexpr (kTls) {
      stream_.async_shutdown([self = shared()](beast::error_code) { self->lowest().close(); });
    } else {
      drain_and_close();
    }
  }

  void drain_and_close() {
    phase_ = Phase::kClosing;
    lowest().expires_after(kCloseTimeout);
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    drain();
  }

  void drain() {
    lowest().async_read_some(asio::buffer(server_.discard()), [self = shared()](beast::error_code ec, size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > kMaxDrainedBytes) return self->lowest().close();
      self->drain();
    });
  }

  // Before an answer: the peer left, took too long, or the handshake failed.
  void end_early(beast::error_code ec) {
    if (ec == beast::error::timeout) server_.count(Closed::kRequestTimeout);
    lowest().close();
  }

  Server& server_;
  const Serving serving_;  // holds the TLS context the stream uses
  Stream stream_;
  beast::flat_buffer buffer_{kMaxRequestHeadBytes + 1024};
  http::request_parser<http::empty_body> parser_;
  size_t drained_ = 0;
  bool aborted_ = false;
};

}  // namespace

MetricsServer::Impl::Impl(const MetricsServerSettings& settings, std::shared_ptr<prometheus::Registry> registry,
                          std::vector<const HealthCheck*> health_checks)
    : settings_(settings), registry_(std::move(registry)), health_checks_(std::move(health_checks)) {
  const prometheus::Labels& labels = settings_.labels;
  auto& closed = prometheus::BuildCounter()
                     .Name("podscope_metrics_connections_closed_total")
                     .Help("Connections to the metrics server closed at one of its bounds, by reason.")
                     .Labels(labels)
                     .Register(*registry_);
  for (size_t i = 0; i < closed_.size(); ++i) closed_[i] = &closed.Add({{"reason", kClosedReasons[i]}});
  held_renders_served_ = &prometheus::BuildCounter()
                              .Name("podscope_metrics_held_renders_served_total")
                              .Help(
                                  "Scrapes of /metrics answered with a render already held by slower connections "
                                  "(at most 2 are held), not a fresh one.")
                              .Labels(labels)
                              .Register(*registry_)
                              .Add({});
  auto& unauthorized = prometheus::BuildCounter()
                           .Name("podscope_metrics_requests_unauthorized_total")
                           .Help("Requests to the metrics server refused by basic authentication, by reason.")
                           .Labels(labels)
                           .Register(*registry_);
  unauthorized_no_credentials_ = &unauthorized.Add({{"reason", "no_credentials"}});
  unauthorized_wrong_credentials_ = &unauthorized.Add({{"reason", "wrong_credentials"}});
  unauthorized_busy_ = &unauthorized.Add({{"reason", "checks_busy"}});
  auto& reloads = prometheus::BuildCounter()
                      .Name("podscope_metrics_web_config_reloads_total")
                      .Help(
                          "Changes of metrics_web_config or its files read again, by outcome (failed: the running "
                          "configuration stays).")
                      .Labels(labels)
                      .Register(*registry_);
  web_config_applied_ = &reloads.Add({{"outcome", "applied"}});
  web_config_failed_ = &reloads.Add({{"outcome", "failed"}});
}

MetricsServer::Impl::~Impl() {
  asio::post(io_, [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    for (const std::weak_ptr<Connection>& weak : connections_) {
      if (std::shared_ptr<Connection> connection = weak.lock()) connection->abort();
    }
    io_.stop();
  });
  if (thread_.joinable()) thread_.join();
  auth_.reset();  // before the io_context: its checks post their answers there
}

absl::Status MetricsServer::Impl::load_web_config() {
  serving_.users = std::make_shared<const MetricsBasicAuth::Users>();
  if (settings_.web_config.empty()) return absl::OkStatus();
  const auto error = [this](const absl::Status& s) {
    return absl::InvalidArgumentError("metrics_web_config " + std::string(s.message()));
  };
  absl::StatusOr<MetricsWebConfig> config = read_metrics_web_config(settings_.web_config);
  if (!config.ok()) return error(config.status());
  web_config_files_ = config->files();
  web_config_stamps_ = stamps_of(web_config_files_);
  if (config->tls.has_value()) {
    absl::StatusOr<std::shared_ptr<asio::ssl::context>> tls = make_tls_context(*config->tls);
    if (!tls.ok()) return error(tls.status());
    serving_.tls = std::move(*tls);
  }
  serving_.users = std::make_shared<const MetricsBasicAuth::Users>(std::move(config->basic_auth_users));
  serves_tls_ = serving_.tls != nullptr;
  started_with_users_ = !serving_.users->empty();
  auth_ = std::make_unique<MetricsBasicAuth>();
  web_config_checked_ = SteadyClock::now();
  return absl::OkStatus();
}

absl::Status MetricsServer::Impl::bind() {
  const std::string& listen = settings_.listen;
  const auto error = [&listen](const std::string& why) {
    return absl::UnavailableError("metrics_listen " + listen + ": cannot listen: " + why);
  };
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return error("expected host:port");
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  beast::error_code ec;
  tcp::endpoint endpoint;
  if (host.empty() || host == "*") {
    unsigned port = 0;
    if (!absl::SimpleAtoi(listen.substr(colon + 1), &port) || port > 65535) return error("bad port");
    endpoint = tcp::endpoint(tcp::v4(), static_cast<uint16_t>(port));
  } else {
    tcp::resolver resolver(io_);
    const auto found =
        resolver.resolve(host, listen.substr(colon + 1), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || found.empty()) return error(ec ? ec.message() : "no address");
    endpoint = found.begin()->endpoint();
  }
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return error(ec.message());
  port_ = acceptor_.local_endpoint().port();
  return absl::OkStatus();
}

void MetricsServer::Impl::run() {
  accept();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "podscope-metrics");
    io_.run();
  });
}

void MetricsServer::Impl::accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) admit(std::move(socket));
    accept();  // an accept error (fds exhausted) is the peer's trouble: the next one is taken
  });
}

// At the limit, the newcomer replaces the oldest connection that holds a slot without a request in (or whose answer
// is out): a scraper sends its request at once, so connections that ask nothing go first. When every slot is
// answering, the answer in progress longest goes: a scraper reads its answer at once, so a client that does not read
// cannot keep the port from the scrapers that come after it.
void MetricsServer::Impl::admit(tcp::socket socket) {
  refresh_web_config();
  beast::error_code ignored;
  socket.set_option(asio::socket_base::send_buffer_size(kSendBufferBytes), ignored);
  std::erase_if(connections_, [](const std::weak_ptr<Connection>& c) { return c.expired(); });
  if (connections_.size() >= kMaxConnections) {
    // Ordered by (answering, since when): the first is pushed out.
    const auto rank = [](const Connection& c) { return std::pair(c.phase() == Connection::Phase::kAnswer, c.since()); };
    std::shared_ptr<Connection> pushed;
    for (const std::weak_ptr<Connection>& weak : connections_) {
      std::shared_ptr<Connection> c = weak.lock();
      if (c != nullptr && (pushed == nullptr || rank(*c) < rank(*pushed))) pushed = std::move(c);
    }
    count(pushed->phase() == Connection::Phase::kAnswer ? Closed::kEvictedSlowReader : Closed::kEvictedAtLimit);
    pushed->abort();
    std::erase_if(connections_, [&pushed](const std::weak_ptr<Connection>& c) { return c.lock() == pushed; });
  }
  std::shared_ptr<Connection> connection;
  if (serving_.tls != nullptr) {
    connection = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(*this, std::move(socket), serving_);
  } else {
    connection = std::make_shared<Session<beast::tcp_stream>>(*this, std::move(socket), serving_);
  }
  connections_.push_back(connection);
  connection->start();
}

// The web config and its files are read again when one of them changed; a configuration that cannot be used is
// logged and counted, and the running one stays.
void MetricsServer::Impl::refresh_web_config() {
  const SteadyClock::time_point now = SteadyClock::now();
  if (settings_.web_config.empty() || now - web_config_checked_ < kWebConfigCheckPeriod) return;
  web_config_checked_ = now;
  std::vector<FileStamp> stamps = stamps_of(web_config_files_);
  if (stamps == web_config_stamps_) return;
  web_config_stamps_ = std::move(stamps);
  absl::StatusOr<MetricsWebConfig> config = read_metrics_web_config(settings_.web_config);
  absl::Status status = config.status();
  Serving serving;
  if (status.ok() && config->tls.has_value() != serves_tls()) {
    status = absl::FailedPreconditionError(std::string("tls_server_config ") + (serves_tls() ? "removed" : "added") +
                                           ": turning TLS on or off takes a restart");
  }
  if (status.ok() && config->tls.has_value()) {
    absl::StatusOr<std::shared_ptr<asio::ssl::context>> tls = make_tls_context(*config->tls);
    status = tls.status();
    if (tls.ok()) serving.tls = std::move(*tls);
  }
  // The files the newest readable file names are watched, so that fixing one of them is seen too. They were stamped
  // before reading (a change made meanwhile is seen by the next check); files named for the first time are now.
  if (config.ok() && config->files() != web_config_files_) {
    web_config_files_ = config->files();
    web_config_stamps_ = stamps_of(web_config_files_);
  }
  if (!status.ok()) {
    web_config_failed_->Increment();
    PODSCOPE_LOG(kError) << "metrics_web_config " << settings_.web_config
                         << " changed but cannot be used; the running configuration stays: " << status.message();
    return;
  }
  serving.users = std::make_shared<const MetricsBasicAuth::Users>(std::move(config->basic_auth_users));
  if (!auth_ && !serving.users->empty()) auth_ = std::make_unique<MetricsBasicAuth>();
  serving_ = std::move(serving);
  web_config_applied_->Increment();
  PODSCOPE_LOG(kInfo) << "metrics_web_config " << settings_.web_config << " read again: " << serving_.users->size()
                      << " basic auth user(s)" << (serves_tls() ? ", TLS" : "");
}

void MetricsServer::Impl::answer(const Asked& asked, const Serving& serving,
                                 std::function<void(std::shared_ptr<Reply>)> done) {
  if (serving.users->empty()) return done(route(asked));
  auth_->check(serving.users, asked.authorization,
               [this, asked, done = std::move(done)](MetricsBasicAuth::Outcome outcome) mutable {
                 // Answered on the io thread, whichever thread decided.
                 asio::post(io_, [this, asked = std::move(asked), done = std::move(done), outcome] {
                   if (outcome == MetricsBasicAuth::Outcome::kAllowed) return done(route(asked));
                   if (outcome == MetricsBasicAuth::Outcome::kBusy) {
                     unauthorized_busy_->Increment();
                     std::shared_ptr<Reply> busy =
                         text_reply(http::status::service_unavailable, "too many password checks waiting\n");
                     busy->message.set(http::field::retry_after, "1");
                     return done(std::move(busy));
                   }
                   (outcome == MetricsBasicAuth::Outcome::kNoCredentials ? unauthorized_no_credentials_
                                                                         : unauthorized_wrong_credentials_)
                       ->Increment();
                   std::shared_ptr<Reply> refused = text_reply(http::status::unauthorized, "Unauthorized\n");
                   refused->message.set(http::field::www_authenticate, "Basic realm=\"podscope\"");
                   done(std::move(refused));
                 });
               });
}

// GET and HEAD of /metrics and /healthz.
std::shared_ptr<Reply> MetricsServer::Impl::route(const Asked& asked) {
  const bool head = asked.method == http::verb::head;
  if (asked.method != http::verb::get && !head) {
    std::shared_ptr<Reply> refused = text_reply(http::status::method_not_allowed, "only GET and HEAD\n");
    refused->message.set(http::field::allow, "GET, HEAD");
    return refused;
  }
  if (asked.path == "/metrics") return metrics_reply(asked.gzip, head);
  if (asked.path == "/healthz") {
    http::status status = http::status::ok;
    std::string body = health_body(status);
    return text_reply(status, std::move(body), head);
  }
  return text_reply(http::status::not_found, "not found\n", head);
}

std::shared_ptr<Reply> MetricsServer::Impl::metrics_reply(bool gzip_it, bool head) {
  std::shared_ptr<Render> render = current_render();
  if (gzip_it && render->gzip.empty()) render->gzip = gzip(render->text);
  const std::string& body = gzip_it ? render->gzip : render->text;
  auto reply = std::make_shared<Reply>();
  reply->message.result(http::status::ok);
  reply->message.set(http::field::content_type, kExposition);
  reply->message.set(http::field::vary, "Accept-Encoding");
  if (gzip_it) reply->message.set(http::field::content_encoding, "gzip");
  reply->message.content_length(body.size());
  if (!head) reply->message.body() = {body.data(), body.size()};
  reply->owner = std::move(render);
  return reply;
}

// A render young enough is shared; at kMaxHeldRenders held by connections still sending them, the newest is served
// whatever its age, so that slow readers hold at most that many bodies.
std::shared_ptr<Render> MetricsServer::Impl::current_render() {
  std::erase_if(renders_, [](const std::weak_ptr<Render>& r) { return r.expired(); });
  const SteadyClock::time_point now = SteadyClock::now();
  std::shared_ptr<Render> newest = renders_.empty() ? nullptr : renders_.back().lock();
  if (newest != nullptr && now - newest->at < kRenderShareWindow) return newest;
  if (newest != nullptr && renders_.size() >= kMaxHeldRenders) {
    held_renders_served_->Increment();
    return newest;
  }
  auto render = std::make_shared<Render>();
  render->at = now;
  render->text = prometheus::TextSerializer().Serialize(registry_->Collect());
  renders_.push_back(render);
  return render;
}

std::string MetricsServer::Impl::health_body(http::status& status) const {
  std::string failing;
  for (const HealthCheck* check : health_checks_) {
    if (std::optional<HealthFailure> failure = check->failure()) {
      std::string why = failure->why;
      std::replace(why.begin(), why.end(), '\n', ' ');  // one line per check
      failing += std::string(check->name()) + ": " + why + " (since " + utc_time(failure->since_ns) + ")\n";
    }
  }
  status = failing.empty() ? http::status::ok : http::status::service_unavailable;
  return failing.empty() ? "ok\n" : failing;
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() = default;

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::start(const MetricsServerSettings& settings,
                                                                    std::shared_ptr<prometheus::Registry> registry,
                                                                    std::vector<const HealthCheck*> health_checks) {
  auto impl = std::make_unique<Impl>(settings, std::move(registry), std::move(health_checks));
  if (absl::Status s = impl->load_web_config(); !s.ok()) return s;
  if (absl::Status s = impl->bind(); !s.ok()) return s;
  impl->run();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

int MetricsServer::port() const { return impl_->port(); }
bool MetricsServer::serves_tls() const { return impl_->serves_tls(); }
bool MetricsServer::requires_basic_auth() const { return impl_->requires_basic_auth(); }

}  // namespace podscope
