// The agent's health under attack, on the real podscope-agent binary: with its fds limited to 256, 300 idle TCP
// connections to the gRPC port make gRPC 1.51's listener fail accept4 with EMFILE, after which it never accepts
// again (connections it already has keep working). The loopback self-check notices: /healthz turns 503 naming it,
// and after three failures in a row the WATCHDOG=1 pings to a fake systemd stop, so systemd would restart it.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "podscope/v1/agent.grpc.pb.h"
#include "tensorflow/profiler_service.grpc.pb.h"
#include "tests/http_client.h"
#include "tests/integration/agent_process.h"

namespace podscope {
namespace {

using namespace std::chrono_literals;
using testing::AgentEnvironment;
using testing::AgentProcess;
using testing::http_fetch;

// The systemd end of sd_notify: the unix datagram socket NOTIFY_SOCKET names.
class FakeSystemd {
 public:
  FakeSystemd() {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path().c_str());
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) throw std::runtime_error("bind failed");
  }
  ~FakeSystemd() { close(fd_); }
  std::string socket_path() const { return scratch_.file("notify"); }

  // Under systemd with WatchdogSec=1s: pings expected every 500 ms.
  AgentEnvironment environment() const {
    AgentEnvironment env;
    env.variables = {"NOTIFY_SOCKET=" + socket_path(), "WATCHDOG_USEC=1000000"};
    return env;
  }

  // How many messages containing `text` arrive within `duration`.
  int count_within(const std::string& text, std::chrono::milliseconds duration) {
    int count = 0;
    const auto end = std::chrono::steady_clock::now() + duration;
    for (auto now = std::chrono::steady_clock::now(); now < end; now = std::chrono::steady_clock::now()) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(end - now).count())) <= 0) break;
      char message[512];
      const ssize_t n = recv(fd_, message, sizeof message, 0);
      if (n > 0 && std::string(message, static_cast<size_t>(n)).find(text) != std::string::npos) ++count;
    }
    return count;
  }
  // Waits up to `timeout` for a message containing `text`.
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char message[512];
      const ssize_t n = recv(fd_, message, sizeof message, 0);
      if (n > 0 && std::string(message, static_cast<size_t>(n)).find(text) != std::string::npos) return true;
    }
    return false;
  }

 private:
  const testing::ScratchDirectory scratch_{"fake_systemd"};
  int fd_ = -1;
};

size_t open_fds(pid_t pid) {
  size_t count = 0;
  std::error_code ignored;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ignored);
       it != std::filesystem::directory_iterator(); it.increment(ignored)) {
    ++count;
  }
  return count;
}

// Ping over a connection of its own (not one an earlier channel of this test already holds).
grpc::Status ping_over_a_new_connection(const AgentProcess& agent) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = podscope::v1::Agent::NewStub(
      grpc::CreateCustomChannel(agent.grpc_address(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 2s);
  podscope::v1::PingRequest request;
  podscope::v1::PingResponse response;
  return stub->Ping(&context, request, &response);
}

// The value of the one series named `name` (any labels) in a /metrics body, or -1.
double metric(const std::string& body, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(body, m, std::regex("\n" + name + R"((\{[^}]*\})? (\S+))"))) return -1;
  return std::stod(m[2]);
}

TEST(AgentHealth, AHealthyAgentAnswersHealthzOkKeepsPingingAndPassesItsSelfCheck) {
  FakeSystemd systemd;
  AgentProcess agent({}, true, systemd.environment());
  ASSERT_TRUE(systemd.wait_for("READY=1", 5s));
  const testing::HttpResponse health = http_fetch(agent.metrics_port(), "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  // One self-check period (10 s) and more: every ping arrives and the check passed.
  EXPECT_GE(systemd.count_within("WATCHDOG=1", 11s), 18);
  const std::string metrics = testing::http_get(agent.metrics_port(), "/metrics");
  EXPECT_EQ(metric(metrics, "podscope_grpc_self_check_failures_total"), 0) << metrics;
  EXPECT_EQ(metric(metrics, "podscope_grpc_self_check_passing"), 1) << metrics;
  EXPECT_EQ(http_fetch(agent.metrics_port(), "/healthz").status, 200);
  EXPECT_TRUE(ping_over_a_new_connection(agent).ok());
}

TEST(AgentHealth, ExhaustedFdsWedgeTheGrpcListenerSoHealthzTurns503AndTheWatchdogPingsStop) {
  FakeSystemd systemd;
  AgentEnvironment environment = systemd.environment();
  environment.open_file_limit = 256;
  AgentProcess agent({}, true, environment);
  ASSERT_TRUE(systemd.wait_for("READY=1", 5s));
  ASSERT_TRUE(systemd.wait_for("WATCHDOG=1", 3s));
  ASSERT_EQ(http_fetch(agent.metrics_port(), "/healthz").status, 200);

  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    const int fd = testing::connect_loopback(agent.grpc_port());
    ASSERT_GE(fd, 0) << "connection " << i;
    idle.push_back(fd);
  }
  for (auto end = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < end;) {
    if (open_fds(agent.pid()) >= 250) break;
    std::this_thread::sleep_for(50ms);
  }
  for (int fd : idle) close(fd);
  agent.read_some(1000);
  ASSERT_NE(agent.output().find("Failed accept4: Too many open files"), std::string::npos) << agent.output();
  // gRPC 1.51 does not re-arm its listener after that: a new connection goes unanswered for good.
  EXPECT_FALSE(ping_over_a_new_connection(agent).ok());

  // The next self-check (every 10 s, 2 s deadline) fails: /healthz names it.
  testing::HttpResponse health;
  for (auto end = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < end;) {
    health = http_fetch(agent.metrics_port(), "/healthz");
    if (health.status != 200) break;
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body.rfind("grpc_self_check: DEADLINE_EXCEEDED: grpc.health.v1.Health/Check on " +
                                  agent.grpc_address() + " over a new connection",
                              0),
            0u)
      << health.body;
  EXPECT_NE(health.body.find("(since 20"), std::string::npos) << health.body;

  // The third failure in a row: logged, and the pings stop.
  ASSERT_TRUE(agent.wait_for_output("gRPC server wedged: its self-check failed 3 times in a row", 40s))
      << agent.output();
  systemd.count_within("WATCHDOG=1", 600ms);  // a ping already sent before the log line
  EXPECT_EQ(systemd.count_within("WATCHDOG=1", 3s), 0) << "pings go on for a wedged gRPC port";
  const std::string metrics = testing::http_get(agent.metrics_port(), "/metrics");
  EXPECT_GE(metric(metrics, "podscope_grpc_self_check_failures_total"), 3) << metrics;
  EXPECT_EQ(metric(metrics, "podscope_grpc_self_check_passing"), 0) << metrics;
}

}  // namespace
}  // namespace podscope
