// The daemons' front door with real servers on loopback: both ports bound and named, the services answering on
// the gRPC port under its request limit, the metrics server reporting the front door's metrics and its self-check,
// TLS with the plaintext loopback port beside it, shutdown refusing new calls, and ports already taken refused by
// name.
#include "front_door/daemon_servers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/grpc_health_service.h"
#include "tests/daemon/grpc_server_fixtures.h"
#include "tests/eventually.h"
#include "tests/http_client.h"
#include "tests/scratch_directory.h"
#include "tls/credentials.h"

namespace podscope::front_door {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::http_fetch;
using testing::metric_value;

// The self-check's period (GrpcSelfCheck::Settings' default, which the front door keeps) and a wait that sees its
// first check done even on a loaded box.
constexpr auto kFirstSelfCheckDone = 10s + 5s;

std::string loopback(int port) { return "127.0.0.1:" + std::to_string(port); }

struct FrontDoor {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<DaemonServers> servers;
};

// Starts a front door with `settings` (plaintext on 127.0.0.1 unless they say otherwise); fails the test when it
// does not start.
FrontDoor start(const Clock& clock, DaemonServerSettings settings) {
  FrontDoor door;
  absl::StatusOr<std::unique_ptr<DaemonServers>> servers =
      DaemonServers::start(std::move(settings), clock, door.registry);
  EXPECT_TRUE(servers.ok()) << servers.status();
  if (servers.ok()) door.servers = std::move(*servers);
  return door;
}

// Both ports on 127.0.0.1, picked by the kernel, serving `services`.
DaemonServerSettings on_loopback(std::vector<grpc::Service*> services) {
  DaemonServerSettings settings;
  settings.listen = "127.0.0.1:0";
  settings.metrics_listen = "127.0.0.1:0";
  settings.services = std::move(services);
  return settings;
}

// grpc.health.v1.Health/Check for `service_name` on a fresh channel to `address`.
grpc::Status health_check(const std::string& address, const std::string& service_name,
                          std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials(),
                          grpc::health::v1::HealthCheckResponse* response = nullptr) {
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(address, std::move(credentials)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service_name);
  grpc::health::v1::HealthCheckResponse ignored;
  return stub->Check(&context, request, response != nullptr ? response : &ignored);
}

TEST(DaemonServers, StartOnPortZeroBindsBothPortsAndNamesThem) {
  Clock clock;
  GrpcHealthService health;
  FrontDoor door = start(clock, on_loopback({&health}));
  ASSERT_NE(door.servers, nullptr);
  const DaemonServers& servers = *door.servers;
  EXPECT_GT(servers.grpc_port(), 0);
  EXPECT_GT(servers.metrics_port(), 0);
  EXPECT_NE(servers.grpc_port(), servers.metrics_port());
  EXPECT_EQ(servers.listening(),
            "grpc=" + loopback(servers.grpc_port()) + " metrics=" + loopback(servers.metrics_port()));

  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status =
      health_check(loopback(servers.grpc_port()), "", grpc::InsecureChannelCredentials(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(servers.serving());
}

TEST(DaemonServers, ARequestOverMaxRequestBytesIsRefusedAndASmallerOneReachesTheService) {
  Clock clock;
  GrpcHealthService health;
  DaemonServerSettings settings = on_loopback({&health});
  settings.max_request_bytes = 1024;
  FrontDoor door = start(clock, std::move(settings));
  ASSERT_NE(door.servers, nullptr);
  const std::string address = loopback(door.servers->grpc_port());

  const grpc::Status too_large = health_check(address, std::string(2048, 'x'));
  EXPECT_EQ(too_large.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << too_large.error_message();
  // Under the limit the health service itself answers: NOT_FOUND for a service name it does not serve.
  const grpc::Status small = health_check(address, std::string(512, 'x'));
  EXPECT_EQ(small.error_code(), grpc::StatusCode::NOT_FOUND) << small.error_message();
  EXPECT_TRUE(health_check(address, "").ok());
}

TEST(DaemonServers, TheMetricsServerAnswersWithTheFrontDoorsMetrics) {
  Clock clock;
  GrpcHealthService health;
  DaemonServerSettings settings = on_loopback({&health});
  settings.listen = "0.0.0.0:0";  // every IPv4 address: a plaintext port other hosts can reach, which is reported
  settings.labels = {{"host", "node-a"}};
  FrontDoor door = start(clock, std::move(settings));
  ASSERT_NE(door.servers, nullptr);
  const DaemonServers& servers = *door.servers;
  EXPECT_THAT(servers.listening(), HasSubstr("grpc=0.0.0.0:" + std::to_string(servers.grpc_port()) + " "));

  const testing::HttpResponse healthz = http_fetch(servers.metrics_port(), "/healthz");
  EXPECT_EQ(healthz.status, 200) << healthz.body;
  const testing::HttpResponse metrics = http_fetch(servers.metrics_port(), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.body, HasSubstr("\npodscope_grpc_self_check_passing{host=\"node-a\"} 1\n"));
  EXPECT_THAT(metrics.body, HasSubstr("\npodscope_grpc_self_check_failures_total{host=\"node-a\"} 0\n"));
  EXPECT_THAT(metrics.body, HasSubstr("\npodscope_plaintext_listen{address=\"0.0.0.0:" +
                                      std::to_string(servers.grpc_port()) + "\",host=\"node-a\"} 1\n"));
}

TEST(DaemonServers, TheSelfCheckPassesOnItsOwnPortAndTheDaemonServes) {
  Clock clock;
  GrpcHealthService health;
  DaemonServerSettings settings = on_loopback({&health});
  settings.listen = "0.0.0.0:0";  // a wildcard address: the self-check dials its loopback address
  FrontDoor door = start(clock, std::move(settings));
  ASSERT_NE(door.servers, nullptr);
  std::this_thread::sleep_for(kFirstSelfCheckDone);
  EXPECT_EQ(metric_value(*door.registry, "podscope_grpc_self_check_failures_total"), 0);
  EXPECT_EQ(metric_value(*door.registry, "podscope_grpc_self_check_passing"), 1);
  EXPECT_TRUE(door.servers->serving());
  EXPECT_EQ(http_fetch(door.servers->metrics_port(), "/healthz").status, 200);
}

TEST(DaemonServers, APortThatFailsItsSelfCheckIsReportedOnHealthzBeforeItCountsAsWedged) {
  Clock clock;
  grpc::health::v1::Health::Service unimplemented;  // the generated service alone answers every call UNIMPLEMENTED
  FrontDoor door = start(clock, on_loopback({&unimplemented}));
  ASSERT_NE(door.servers, nullptr);
  ASSERT_TRUE(testing::wait_for(
      [&] { return metric_value(*door.registry, "podscope_grpc_self_check_failures_total") >= 1; }, 60s));
  const testing::HttpResponse healthz = http_fetch(door.servers->metrics_port(), "/healthz");
  EXPECT_EQ(healthz.status, 503);
  EXPECT_THAT(healthz.body, HasSubstr("grpc_self_check"));
  EXPECT_THAT(healthz.body, HasSubstr(loopback(door.servers->grpc_port())));
  // One failure is no wedge: the watchdog is still fed (three in a row take two more periods).
  EXPECT_TRUE(door.servers->serving());
}

TEST(DaemonServers, ShutdownRefusesNewCalls) {
  Clock clock;
  GrpcHealthService health;
  FrontDoor door = start(clock, on_loopback({&health}));
  ASSERT_NE(door.servers, nullptr);
  const std::string address = loopback(door.servers->grpc_port());
  ASSERT_TRUE(health_check(address, "").ok());
  door.servers->shutdown(1s);
  EXPECT_EQ(health_check(address, "").error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(DaemonServers, AnAddressAlreadyTakenIsAnErrorNamingIt) {
  Clock clock;
  GrpcHealthService health;
  FrontDoor first = start(clock, on_loopback({&health}));
  ASSERT_NE(first.servers, nullptr);
  const std::string grpc_taken = loopback(first.servers->grpc_port());
  const std::string metrics_taken = loopback(first.servers->metrics_port());

  GrpcHealthService second_health;
  DaemonServerSettings same_grpc = on_loopback({&second_health});
  same_grpc.listen = grpc_taken;
  const absl::StatusOr<std::unique_ptr<DaemonServers>> grpc_refused =
      DaemonServers::start(std::move(same_grpc), clock, std::make_shared<prometheus::Registry>());
  ASSERT_FALSE(grpc_refused.ok());
  EXPECT_THAT(grpc_refused.status().message(), HasSubstr("listen " + grpc_taken));

  DaemonServerSettings same_metrics = on_loopback({&second_health});
  same_metrics.metrics_listen = metrics_taken;
  const absl::StatusOr<std::unique_ptr<DaemonServers>> metrics_refused =
      DaemonServers::start(std::move(same_metrics), clock, std::make_shared<prometheus::Registry>());
  ASSERT_FALSE(metrics_refused.ok());
  EXPECT_THAT(metrics_refused.status().message(), HasSubstr("metrics_listen " + metrics_taken));

  // The first front door still serves.
  EXPECT_TRUE(health_check(grpc_taken, "").ok());
}

// With TLS: the test certificates (tests/integration/test_certs.py), made once for the suite.
class DaemonServersOverTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = std::make_unique<testing::ScratchDirectory>("front_door_certs");
    const std::string make =
        "python3 " PODSCOPE_SOURCE_DIR "/tests/integration/test_certs.py " + certs_->path().string();
    ASSERT_EQ(std::system(make.c_str()), 0) << make;
  }
  static void TearDownTestSuite() { certs_.reset(); }

  static std::string cert(const std::string& file) { return (certs_->path() / file).string(); }
  // The daemon's keys: its identity, callers verified by the test CA, the plaintext loopback port beside.
  static tls::TlsConfig daemon_tls() {
    return {.cert = cert("server.pem"),
            .key = cert("server.key"),
            .client_ca = cert("ca.pem"),
            .plaintext_listen = "127.0.0.1:0"};
  }
  // A client presenting the CLI's certificate and verifying the daemon's.
  static std::shared_ptr<grpc::ChannelCredentials> cli_credentials() {
    return tls::channel_credentials({.cert = cert("cli.pem"), .key = cert("cli.key"), .ca = cert("ca.pem")});
  }

  static std::unique_ptr<testing::ScratchDirectory> certs_;
  Clock clock_;
  GrpcHealthService health_;
};
std::unique_ptr<testing::ScratchDirectory> DaemonServersOverTls::certs_;

TEST_F(DaemonServersOverTls, TheTlsPortTakesCertifiedCallersAndThePlaintextPortLocalOnes) {
  DaemonServerSettings settings = on_loopback({&health_});
  settings.tls = daemon_tls();
  FrontDoor door = start(clock_, std::move(settings));
  ASSERT_NE(door.servers, nullptr);
  const std::string listening = door.servers->listening();
  const size_t plaintext_at = listening.find(" plaintext=127.0.0.1:");
  ASSERT_NE(plaintext_at, std::string::npos) << listening;
  EXPECT_THAT(listening, HasSubstr(" tls"));
  const int plaintext_port = std::atoi(listening.c_str() + plaintext_at + std::string(" plaintext=127.0.0.1:").size());
  ASSERT_GT(plaintext_port, 0) << listening;
  EXPECT_NE(plaintext_port, door.servers->grpc_port());

  const std::string tls_address = loopback(door.servers->grpc_port());
  const grpc::Status certified = health_check(tls_address, "", cli_credentials());
  EXPECT_TRUE(certified.ok()) << certified.error_message();
  EXPECT_EQ(health_check(tls_address, "").error_code(), grpc::StatusCode::UNAVAILABLE);  // plaintext on TLS
  const grpc::Status local = health_check(loopback(plaintext_port), "");
  EXPECT_TRUE(local.ok()) << local.error_message();

  const testing::HttpResponse metrics = http_fetch(door.servers->metrics_port(), "/metrics");
  EXPECT_THAT(metrics.body, HasSubstr("\npodscope_tls_cert_expiry_seconds "));
  EXPECT_THAT(metrics.body, HasSubstr("\npodscope_tls_handshakes_failed_total "));
}

TEST_F(DaemonServersOverTls, TheSelfCheckPassesWithTheDaemonsOwnIdentity) {
  DaemonServerSettings settings = on_loopback({&health_});
  settings.tls = daemon_tls();
  FrontDoor door = start(clock_, std::move(settings));
  ASSERT_NE(door.servers, nullptr);
  std::this_thread::sleep_for(kFirstSelfCheckDone);
  EXPECT_EQ(metric_value(*door.registry, "podscope_grpc_self_check_failures_total"), 0);
  EXPECT_TRUE(door.servers->serving());
  EXPECT_EQ(http_fetch(door.servers->metrics_port(), "/healthz").status, 200);
}

TEST_F(DaemonServersOverTls, APlaintextListenAlreadyTakenIsAnErrorNamingIt) {
  DaemonServerSettings first_settings = on_loopback({&health_});
  first_settings.tls = daemon_tls();
  FrontDoor first = start(clock_, std::move(first_settings));
  ASSERT_NE(first.servers, nullptr);
  const std::string listening = first.servers->listening();
  const size_t at = listening.find(" plaintext=");
  ASSERT_NE(at, std::string::npos) << listening;
  const std::string taken = listening.substr(at + 11, listening.find(' ', at + 1) - at - 11);

  GrpcHealthService second_health;
  DaemonServerSettings second = on_loopback({&second_health});
  second.tls = daemon_tls();
  second.tls.plaintext_listen = taken;
  const absl::StatusOr<std::unique_ptr<DaemonServers>> refused =
      DaemonServers::start(std::move(second), clock_, std::make_shared<prometheus::Registry>());
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("plaintext_listen " + taken));
}

}  // namespace
}  // namespace podscope::front_door
