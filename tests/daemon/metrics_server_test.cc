#include "daemon/metrics_server.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <chrono>

#include "daemon/grpc_self_check.h"
#include "tests/daemon/grpc_server_fixtures.h"
#include "tests/http_client.h"

namespace podscope {
namespace {

using namespace std::chrono_literals;
using testing::HealthServer;
using testing::http_fetch;
using testing::NeverAcceptingListener;

std::unique_ptr<MetricsServer> start_server(std::shared_ptr<prometheus::Registry> registry,
                                            std::vector<const HealthCheck*> checks = {}) {
  absl::StatusOr<std::unique_ptr<MetricsServer>> server = MetricsServer::start("127.0.0.1:0", registry, checks);
  if (!server.ok()) throw std::runtime_error(std::string(server.status().message()));
  return std::move(*server);
}

GrpcSelfCheck::Settings check_of(const std::string& target) {
  return {.target = target, .period = 10s, .deadline = 200ms, .failures_to_wedge = 3};
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
  const testing::HttpResponse response = http_fetch(server->port(), "/metrics");
  EXPECT_EQ(response.status, 200);
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

// A connected TCP socket to the server that has sent nothing.
int connect_idle(int port) {
  const int fd = testing::connect_loopback(port);
  if (fd < 0) throw std::runtime_error("connect failed");
  return fd;
}

// The value of one sample line ("name{labels} value") in a /metrics body, -1 when absent.
double sample(const std::string& body, const std::string& series) {
  const size_t at = body.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(body.substr(at + series.size() + 2));
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
  EXPECT_GE(sample(metrics.body, "podscope_metrics_connections_closed_total{reason=\"evicted_at_limit\"}"), 64)
      << metrics.body;
  for (int fd : idle) close(fd);
}

TEST(MetricsServer, AConnectionThatSaysNothingIsClosedAfterTheRequestTimeoutAndCounted) {
  auto server = start_server(std::make_shared<prometheus::Registry>());
  const int fd = connect_idle(server->port());
  timeval wait{.tv_sec = 5, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  char byte;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(read(fd, &byte, 1), 0);  // the server closed it
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  close(fd);
  const std::string body = http_fetch(server->port(), "/metrics").body;
  EXPECT_EQ(sample(body, "podscope_metrics_connections_closed_total{reason=\"request_timeout\"}"), 1) << body;
}

TEST(MetricsServer, AnOversizedRequestIsRefusedWith431AndCounted) {
  auto server = start_server(std::make_shared<prometheus::Registry>());
  const testing::HttpResponse refused = http_fetch(server->port(), "/metrics?" + std::string(20000, 'a'));
  EXPECT_EQ(refused.status, 431);
  const std::string body = http_fetch(server->port(), "/metrics").body;
  EXPECT_EQ(sample(body, "podscope_metrics_connections_closed_total{reason=\"request_too_large\"}"), 1) << body;
}

TEST(MetricsServer, HeadAnswersWithoutABodyAndOtherMethodsAre405) {
  auto server = start_server(std::make_shared<prometheus::Registry>());
  EXPECT_EQ(testing::http_request(server->port(), "HEAD /healthz HTTP/1.0\r\n\r\n"),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 3\r\n"
            "Connection: close\r\n\r\n");
  EXPECT_EQ(testing::http_request(server->port(), "POST /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 405 ", 0), 0u);
}

TEST(MetricsServer, APortInUseIsAnErrorNamingTheAddress) {
  auto registry = std::make_shared<prometheus::Registry>();
  auto first = start_server(registry);
  const std::string taken = "127.0.0.1:" + std::to_string(first->port());
  absl::StatusOr<std::unique_ptr<MetricsServer>> second = MetricsServer::start(taken, registry, {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("metrics_listen " + taken + ": cannot listen"), std::string::npos)
      << second.status();
}

TEST(MetricsServer, StopsWithinASecond) {
  auto server = start_server(std::make_shared<prometheus::Registry>());
  const auto start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

}  // namespace
}  // namespace podscope
