#include "daemon/metrics_server.h"

#include <crypt.h>
#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <zlib.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "daemon/grpc_self_check.h"
#include "tests/daemon/grpc_server_fixtures.h"
#include "tests/http_client.h"
#include "tests/scratch_directory.h"

namespace podscope {
namespace {

using namespace std::chrono_literals;
using testing::HealthServer;
using testing::http_fetch;
using testing::http_request;
using testing::NeverAcceptingListener;

std::unique_ptr<MetricsServer> start_server(std::shared_ptr<prometheus::Registry> registry,
                                            std::vector<const HealthCheck*> checks = {},
                                            const std::string& web_config = "") {
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::start({.listen = "127.0.0.1:0", .web_config = web_config}, registry, checks);
  if (!server.ok()) throw std::runtime_error(std::string(server.status().message()));
  return std::move(*server);
}

GrpcSelfCheck::Settings check_of(const std::string& target) {
  return {.target = target, .period = 10s, .deadline = 200ms, .failures_to_wedge = 3};
}

// An answer split into its status, headers ("Name: value\r\n" lines) and body.
struct RawAnswer {
  int status = 0;
  std::string head;
  std::string body;
  std::string header(const std::string& name) const {
    const size_t at = head.find("\r\n" + name + ": ");
    if (at == std::string::npos) return "";
    const size_t from = at + name.size() + 4;
    return head.substr(from, head.find("\r\n", from) - from);
  }
};

RawAnswer ask(int port, const std::string& request) {
  const std::string raw = http_request(port, request);
  RawAnswer answer;
  const size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || end == std::string::npos) throw std::runtime_error("bad HTTP: " + raw);
  answer.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  answer.head = raw.substr(0, end + 2);
  answer.body = raw.substr(end + 4);
  return answer;
}

RawAnswer get(int port, const std::string& path, const std::string& headers = "") {
  return ask(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + "\r\n");
}

// The value of one sample line ("name{labels} value") in a /metrics body, -1 when absent.
double sample(const std::string& body, const std::string& series) {
  const size_t at = body.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(body.substr(at + series.size() + 2));
}

double closed(const std::string& body, const std::string& reason) {
  return sample(body, "podscope_metrics_connections_closed_total{reason=\"" + reason + "\"}");
}

std::string gunzip(const std::string& compressed) {
  z_stream z{};
  inflateInit2(&z, 16 + 15);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  z.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buffer[65536];
  int result = Z_OK;
  while (result == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    result = inflate(&z, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - z.avail_out);
  }
  inflateEnd(&z);
  if (result != Z_STREAM_END) throw std::runtime_error("not a whole gzip stream");
  return out;
}

// A registry of `series` gauges with long label values: a /metrics of about series × 150 bytes.
std::shared_ptr<prometheus::Registry> big_registry(int series) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto& family = prometheus::BuildGauge().Name("podscope_test_big").Help("Padding.").Register(*registry);
  for (int i = 0; i < series; ++i) {
    family.Add({{"pid", std::to_string(i)}, {"padding", std::string(100, 'a' + i % 26)}}).Set(i);
  }
  return registry;
}

TEST(MetricsServer, ServesTheRegistryAtMetricsOnTheBoundPort) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter()
      .Name("podscope_test_events_total")
      .Help("Events.")
      .Register(*registry)
      .Add({})
      .Increment(3);
  auto server = start_server(registry);
  ASSERT_GT(server->port(), 0);
  const RawAnswer response = get(server->port(), "/metrics");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(response.header("Connection"), "close");
  EXPECT_EQ(response.header("Content-Encoding"), "");
  EXPECT_NE(response.body.find("# TYPE podscope_test_events_total counter\npodscope_test_events_total 3\n"),
            std::string::npos)
      << response.body;
  EXPECT_EQ(http_fetch(server->port(), "/nothing-here").status, 404);
}

TEST(MetricsServer, HealthzIsOkWhileEveryCheckPasses) {
  auto registry = std::make_shared<prometheus::Registry>();
  HealthServer grpc_server;
  Clock clock;
  GrpcSelfCheck check(check_of(grpc_server.address()), clock, *registry, {});
  ASSERT_TRUE(check.check_now().ok());
  auto server = start_server(registry, {&check});
  const testing::HttpResponse response = http_fetch(server->port(), "/healthz");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "ok\n");
}

TEST(MetricsServer, HealthzIs503WithOneLinePerFailingCheckNamingItWhyAndSince) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto other_registry = std::make_shared<prometheus::Registry>();
  HealthServer grpc_server;
  NeverAcceptingListener wedged;
  Clock clock;
  GrpcSelfCheck passing(check_of(grpc_server.address()), clock, *registry, {});
  GrpcSelfCheck failing(check_of(wedged.address()), clock, *other_registry, {});
  ASSERT_TRUE(passing.check_now().ok());
  ASSERT_FALSE(failing.check_now().ok());
  auto server = start_server(registry, {&passing, &failing});
  const testing::HttpResponse response = http_fetch(server->port(), "/healthz");
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(
      response.body.rfind("grpc_self_check: DEADLINE_EXCEEDED: grpc.health.v1.Health/Check on " + wedged.address(), 0),
      0u)
      << response.body;
  EXPECT_NE(response.body.find("; 1 failure(s) in a row (since 20"), std::string::npos) << response.body;
  EXPECT_EQ(std::count(response.body.begin(), response.body.end(), '\n'), 1) << response.body;
  EXPECT_EQ(response.body.back(), '\n');
}

TEST(MetricsServer, HeadAnswersWithoutABodyAndOtherMethodsAre405) {
  auto server = start_server(std::make_shared<prometheus::Registry>());
  const RawAnswer head = ask(server->port(), "HEAD /healthz HTTP/1.0\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("Content-Length"), "3");
  EXPECT_EQ(head.body, "");
  const RawAnswer post = ask(server->port(), "POST /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.header("Allow"), "GET, HEAD");
}

TEST(MetricsServer, GzipsMetricsWhenTheScraperAcceptsIt) {
  auto registry = big_registry(2000);
  auto server = start_server(registry);
  const RawAnswer plain = get(server->port(), "/metrics");
  ASSERT_EQ(plain.status, 200);
  EXPECT_EQ(plain.header("Vary"), "Accept-Encoding");
  for (const std::string accept : {"gzip", "deflate, gzip;q=0.5, br", "*", "GZIP ; q=1.0"}) {
    const RawAnswer zipped = get(server->port(), "/metrics", "Accept-Encoding: " + accept + "\r\n");
    ASSERT_EQ(zipped.status, 200) << accept;
    EXPECT_EQ(zipped.header("Content-Encoding"), "gzip") << accept;
    EXPECT_EQ(zipped.header("Content-Length"), std::to_string(zipped.body.size()));
    EXPECT_LT(zipped.body.size() * 10, plain.body.size()) << accept;
    EXPECT_EQ(gunzip(zipped.body), plain.body) << accept;
  }
  for (const std::string accept : {"gzip;q=0", "deflate, br", "*;q=0", "identity"}) {
    const RawAnswer identity = get(server->port(), "/metrics", "Accept-Encoding: " + accept + "\r\n");
    EXPECT_EQ(identity.header("Content-Encoding"), "") << accept;
    EXPECT_EQ(identity.body, plain.body) << accept;
  }
}

TEST(MetricsServer, A9000ByteHeaderIsRefusedWith431AndCounted) {
  auto server = start_server(std::make_shared<prometheus::Registry>());
  const RawAnswer header = get(server->port(), "/metrics", "X-Padding: " + std::string(9000, 'a') + "\r\n");
  EXPECT_EQ(header.status, 431);
  const RawAnswer target = get(server->port(), "/metrics?" + std::string(20000, 'a'));
  EXPECT_EQ(target.status, 431);
  // Just under the bound is served.
  EXPECT_EQ(get(server->port(), "/metrics", "X-Padding: " + std::string(7000, 'a') + "\r\n").status, 200);
  EXPECT_EQ(closed(get(server->port(), "/metrics").body, "request_too_large"), 2);
}

TEST(MetricsServer, AnLfOnlyRequestIsAnsweredAtOnce) {
  auto server = start_server(std::make_shared<prometheus::Registry>());
  const auto start = std::chrono::steady_clock::now();
  const RawAnswer answer = ask(server->port(), "GET /metrics HTTP/1.0\n\n");
  // Answered as it arrives, not when the request timeout (5 s) gives up on a request that never ends.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(answer.status, 400);
  EXPECT_EQ(closed(get(server->port(), "/metrics").body, "bad_request"), 1);
}

// A connected TCP socket to the server that has sent nothing.
int connect_idle(int port) {
  const int fd = testing::connect_loopback(port);
  if (fd < 0) throw std::runtime_error("connect failed");
  return fd;
}

TEST(MetricsServer, AScrapeDoesNotWaitBehind128IdleConnections) {
  auto server = start_server(std::make_shared<prometheus::Registry>());
  std::vector<int> idle;
  for (int i = 0; i < 128; ++i) idle.push_back(connect_idle(server->port()));  // connected, never sends a byte
  const auto start = std::chrono::steady_clock::now();
  const testing::HttpResponse metrics = http_fetch(server->port(), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(http_fetch(server->port(), "/healthz").status, 200);
  // Each scrape is answered as soon as it asks; the bound leaves room for a loaded box, far below the request
  // timeout that idle connections would otherwise each cost.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  // The idle connections past the limit were pushed out by newer ones, and counted.
  EXPECT_GE(closed(metrics.body, "evicted_at_limit"), 64) << metrics.body;
  for (int fd : idle) close(fd);
}

TEST(MetricsServer, AConnectionThatSaysNothingIsClosedAfterTheRequestTimeoutAndCounted) {
  auto server = start_server(std::make_shared<prometheus::Registry>());
  const int fd = connect_idle(server->port());
  timeval wait{.tv_sec = 10, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  char byte;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(read(fd, &byte, 1), 0);  // the server closed it
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
  close(fd);
  EXPECT_EQ(closed(http_fetch(server->port(), "/metrics").body, "request_timeout"), 1);
}

// Connects and asks for /metrics with a small receive buffer, then never reads.
int ask_and_never_read(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) throw std::runtime_error("connect failed");
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    throw std::runtime_error("write failed");
  }
  return fd;
}

TEST(MetricsServer, ClientsThatNeverReadShareAtMostTwoRendersAndAreClosedAtTheWriteTimeout) {
  auto registry = big_registry(20000);  // about 3 MB
  auto server = start_server(registry);
  std::vector<int> stalled;
  // Three waves more than the share window apart: the first two render, the third is given the newest held render.
  for (int wave = 0; wave < 3; ++wave) {
    for (int i = 0; i < 20; ++i) stalled.push_back(ask_and_never_read(server->port()));
    std::this_thread::sleep_for(1200ms);
  }
  // Each is closed when its answer has not gone out within the write timeout (10 s), and counted. Meanwhile scrapes
  // are answered from the held renders, whose counters are as old as they are.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  double timed_out = 0;
  while (timed_out < 60 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(500ms);
    timed_out = closed(get(server->port(), "/metrics").body, "write_timeout");
  }
  EXPECT_EQ(timed_out, 60);
  const std::string fresh = get(server->port(), "/metrics").body;
  EXPECT_GE(sample(fresh, "podscope_metrics_held_renders_served_total"), 20);
  // The stalled connections held answers in progress: the limit never pushed them out.
  EXPECT_EQ(closed(fresh, "evicted_at_limit"), 0);
  for (int fd : stalled) close(fd);
}

TEST(MetricsServer, AScraperIsServedWhileEverySlotHoldsAClientThatNeverReads) {
  auto server = start_server(big_registry(20000));
  std::vector<int> stalled;
  for (int i = 0; i < 64; ++i) stalled.push_back(ask_and_never_read(server->port()));
  std::this_thread::sleep_for(500ms);
  // The answer in progress longest makes room (once: the scrape's slot is free again after it), so a client that
  // does not read cannot keep scrapers out.
  EXPECT_EQ(get(server->port(), "/metrics").status, 200);
  EXPECT_EQ(get(server->port(), "/healthz").status, 200);
  for (int fd : stalled) close(fd);
  std::this_thread::sleep_for(500ms);  // their answers end, and with them the renders they held
  const std::string fresh = get(server->port(), "/metrics").body;
  EXPECT_EQ(closed(fresh, "evicted_slow_reader"), 1) << fresh.substr(0, 2000);
}

TEST(MetricsServer, APortInUseIsAnErrorNamingTheAddress) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto first = start_server(registry);
  const std::string taken = "127.0.0.1:" + std::to_string(first->port());
  absl::StatusOr<std::unique_ptr<MetricsServer>> second =
      MetricsServer::start({.listen = taken}, std::make_shared<prometheus::Registry>(), {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("metrics_listen " + taken + ": cannot listen"), std::string::npos)
      << second.status();
}

TEST(MetricsServer, StopsWithinASecondWhileClientsHoldConnections) {
  auto server = start_server(big_registry(20000));
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) held.push_back(ask_and_never_read(server->port()));  // answers in progress
  for (int i = 0; i < 8; ++i) held.push_back(connect_idle(server->port()));        // requests not sent
  std::this_thread::sleep_for(200ms);
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  for (int fd : held) close(fd);
}

// --- metrics_web_config: basic authentication (basic_auth_users) ---

// A bcrypt hash of `password` made by libxcrypt, as htpasswd -B would.
std::string bcrypt(const std::string& password, int cost) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2y$", cost, nullptr, 0, salt, sizeof salt) == nullptr) throw std::runtime_error("gensalt");
  crypt_data data{};
  const char* hash = crypt_rn(password.c_str(), salt, &data, sizeof data);
  if (hash == nullptr) throw std::runtime_error("crypt");
  return hash;
}

std::string basic(const std::string& user, const std::string& password) {
  return "Authorization: Basic " + absl::Base64Escape(user + ":" + password) + "\r\n";
}

class MetricsServerWebConfig : public ::testing::Test {
 protected:
  std::string web_config(const std::string& text) {
    const std::string path = (dir_ / "web.yml").string();
    std::ofstream(path) << text;
    return path;
  }

  const testing::ScratchDirectory scratch_{"metrics_auth"};
  const std::filesystem::path& dir_ = scratch_.path();
};

TEST_F(MetricsServerWebConfig, OnlyAUserWithItsPasswordIsServed) {
  const std::string config = web_config("basic_auth_users:\n  prometheus: " + bcrypt("s3cret", 5) +
                                        "\n  other: " + bcrypt("other-password", 5) + "\n");
  auto server = start_server(std::make_shared<prometheus::Registry>(), {}, config);
  EXPECT_TRUE(server->requires_basic_auth());
  EXPECT_FALSE(server->serves_tls());
  const RawAnswer none = get(server->port(), "/metrics");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.header("WWW-Authenticate"), "Basic realm=\"podscope\"");
  EXPECT_EQ(get(server->port(), "/healthz").status, 401);
  EXPECT_EQ(get(server->port(), "/metrics", basic("prometheus", "wrong")).status, 401);
  EXPECT_EQ(get(server->port(), "/metrics", basic("prometheus", "other-password")).status, 401);
  EXPECT_EQ(get(server->port(), "/metrics", basic("nobody", "s3cret")).status, 401);
  EXPECT_EQ(get(server->port(), "/metrics", basic("prometheus", std::string("s3cret\0x", 8))).status, 401);
  EXPECT_EQ(get(server->port(), "/metrics", "Authorization: Bearer abc\r\n").status, 401);
  EXPECT_EQ(get(server->port(), "/healthz", basic("prometheus", "s3cret")).status, 200);
  const RawAnswer served = get(server->port(), "/metrics", basic("prometheus", "s3cret"));
  ASSERT_EQ(served.status, 200);
  const std::string unauthorized = "podscope_metrics_requests_unauthorized_total{reason=";
  EXPECT_EQ(sample(served.body, unauthorized + "\"no_credentials\"}"), 3) << served.body;
  EXPECT_EQ(sample(served.body, unauthorized + "\"wrong_credentials\"}"), 4) << served.body;
}

TEST_F(MetricsServerWebConfig, AFloodOfWrongPasswordsNeitherDelaysAScraperNorQueuesWithoutBound) {
  // Cost 12: each check takes a few hundred milliseconds, so the flood's checks pile up.
  const std::string config = web_config("basic_auth_users:\n  prometheus: " + bcrypt("s3cret", 12) + "\n");
  auto server = start_server(std::make_shared<prometheus::Registry>(), {}, config);
  ASSERT_EQ(get(server->port(), "/metrics", basic("prometheus", "s3cret")).status, 200);  // its password passed once
  std::atomic<int> busy = 0, refused = 0;
  std::vector<std::thread> flood;
  for (int i = 0; i < 24; ++i) {
    flood.emplace_back([&, i] {
      const int status = get(server->port(), "/metrics", basic("prometheus", "guess" + std::to_string(i))).status;
      (status == 503 ? busy : refused)++;
    });
  }
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  const RawAnswer scrape = get(server->port(), "/metrics", basic("prometheus", "s3cret"));
  const auto took = std::chrono::steady_clock::now() - start;
  for (std::thread& t : flood) t.join();
  EXPECT_EQ(scrape.status, 200);
  // The scraper's remembered password is not checked again: it waits for none of the flood's checks (8 waiting
  // checks of cost 12 take seconds).
  EXPECT_LT(took, 1s);
  EXPECT_GT(busy.load(), 0);  // at most 8 checks wait; the rest are answered busy at once
  EXPECT_EQ(busy + refused, 24);
  const std::string body = get(server->port(), "/metrics", basic("prometheus", "s3cret")).body;
  EXPECT_EQ(sample(body, "podscope_metrics_requests_unauthorized_total{reason=\"checks_busy\"}"), busy.load());
}

TEST_F(MetricsServerWebConfig, AChangedFileIsReadAgainAndABrokenOneKeepsTheRunningUsers) {
  const std::string config = web_config("basic_auth_users:\n  prometheus: " + bcrypt("first", 4) + "\n");
  auto server = start_server(std::make_shared<prometheus::Registry>(), {}, config);
  EXPECT_EQ(get(server->port(), "/metrics", basic("prometheus", "first")).status, 200);
  std::this_thread::sleep_for(1100ms);  // changes are looked for at most once a second
  web_config("basic_auth_users:\n  prometheus: " + bcrypt("second", 4) + "\n");
  get(server->port(), "/healthz");  // a connection makes the server look
  EXPECT_EQ(get(server->port(), "/metrics", basic("prometheus", "first")).status, 401);
  EXPECT_EQ(get(server->port(), "/metrics", basic("prometheus", "second")).status, 200);
  std::this_thread::sleep_for(1100ms);
  web_config("basic_auth_users:\n  prometheus: not-a-hash\n");
  get(server->port(), "/healthz");
  const RawAnswer kept = get(server->port(), "/metrics", basic("prometheus", "second"));
  EXPECT_EQ(kept.status, 200);
  EXPECT_EQ(sample(kept.body, "podscope_metrics_web_config_reloads_total{outcome=\"applied\"}"), 1) << kept.body;
  EXPECT_EQ(sample(kept.body, "podscope_metrics_web_config_reloads_total{outcome=\"failed\"}"), 1) << kept.body;
}

TEST_F(MetricsServerWebConfig, ABadFileStopsTheStartNamingTheOptionAndTheLine) {
  const std::string config = web_config("basic_auth_users:\n  prometheus: plain-text-password\n");
  absl::StatusOr<std::unique_ptr<MetricsServer>> server = MetricsServer::start(
      {.listen = "127.0.0.1:0", .web_config = config}, std::make_shared<prometheus::Registry>(), {});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().message(), "metrics_web_config " + config +
                                           ":2: basic_auth_users.prometheus: is not a bcrypt hash ($2a$, $2b$ or "
                                           "$2y$, as htpasswd -B writes)");
}

// --- TLS (metrics_web_config's tls_server_config), with curl as the client ---

// What `command` prints on stdout.
std::string output_of(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  pclose(pipe);
  return out;
}

TEST_F(MetricsServerWebConfig, ServesTlsToCurlRefusesPlainHttpAndStopsWithHandshakesPending) {
  const std::string certs = (dir_ / "certs").string();
  ASSERT_EQ(std::system(("python3 " PODSCOPE_SOURCE_DIR "/tests/integration/test_certs.py " + certs).c_str()), 0);
  const std::string config = web_config(
      "tls_server_config:\n  cert_file: certs/server.pem\n"
      "  key_file: certs/server.key\nbasic_auth_users:\n  prometheus: " +
      bcrypt("s3cret", 4) + "\n");
  auto server = start_server(big_registry(200), {}, config);
  EXPECT_TRUE(server->serves_tls());
  const std::string url = "https://127.0.0.1:" + std::to_string(server->port()) + "/metrics";
  const std::string curl = "curl -sS --max-time 10 --cacert " + certs + "/ca.pem ";
  EXPECT_NE(output_of(curl + "--compressed -u prometheus:s3cret " + url).find("podscope_test_big{"), std::string::npos);
  EXPECT_EQ(output_of(curl + "-o /dev/null -w '%{http_code}' -u prometheus:wrong " + url), "401");
  EXPECT_EQ(get(server->port(), "/metrics").body, "Client sent an HTTP request to an HTTPS server.\n");
  std::vector<int> pending;
  for (int i = 0; i < 4; ++i) pending.push_back(connect_idle(server->port()));  // handshakes never started
  pending.push_back(ask_and_never_read(server->port()));                        // not TLS, never read
  std::this_thread::sleep_for(200ms);
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  for (int fd : pending) close(fd);
}

}  // namespace
}  // namespace podscope
