// The agent's registration against a real coordinator (podscope-coordinator's daemon, in process, on loopback) that
// checks each registration by calling the registered address back (a lightweight agent answers there): what it
// registers, heartbeats, retries while the coordinator is down and registers again with a restarted one; a stop
// cancels a call the coordinator never answers; trigger reports carry the registered host name, also after stop;
// the address it advertises and the instance id it chooses.
#include "agent/registration/coordinator_registration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "coordinator/coordinator_daemon.h"
#include "tests/daemon/grpc_server_fixtures.h"
#include "tests/eventually.h"
#include "tests/pod_capture/lightweight_agent.h"

namespace podscope::agent {
namespace {

using testing::eventually;
using ::testing::HasSubstr;

constexpr char kHost[] = "node7";

class CoordinatorRegistrationTest : public ::testing::Test {
 protected:
  // Starts the coordinator on `port` (0: any), heartbeats asked every 100 ms.
  void start_coordinator(int port = 0) {
    coordinator::CoordinatorConfig config;
    config.listen = "127.0.0.1:" + std::to_string(port);
    config.metrics_listen = "127.0.0.1:0";
    config.heartbeat_interval_ms = 100;
    coordinator_.emplace(config);
    ASSERT_TRUE(coordinator_->start().ok());
    port_ = coordinator_->grpc_port();
  }
  void stop_coordinator() {
    coordinator_->shutdown();
    coordinator_.reset();
  }
  std::string coordinator_address() const { return "127.0.0.1:" + std::to_string(port_); }

  RegistrationSettings settings() {
    RegistrationSettings s;
    s.coordinator = coordinator_address();
    s.host_name = kHost;
    s.job = "train";
    s.instance_id = "lightweight";  // the lightweight agent's own: the coordinator's call-back finds it there
    s.credentials = grpc::InsecureChannelCredentials();
    s.advertised_address = [this] {
      ++advertised_;
      return agent_.address();
    };
    s.retry_interval_ms = 50;
    return s;
  }

  // The coordinator's record of kHost, if it has one.
  std::optional<podscope::v1::WorkerInfo> worker() const {
    auto stub = podscope::v1::Coordinator::NewStub(
        grpc::CreateChannel(coordinator_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    podscope::v1::ListWorkersResponse response;
    if (!stub->ListWorkers(&context, {}, &response).ok()) return std::nullopt;
    for (const podscope::v1::WorkerInfo& w : response.workers()) {
      if (w.host_name() == kHost) return w;
    }
    return std::nullopt;
  }

  testing::TimerThread timers_;
  testing::LightweightAgent agent_{{.host_name = kHost}, timers_};
  std::optional<coordinator::CoordinatorDaemon> coordinator_;
  int port_ = 0;
  std::atomic<int> advertised_{0};
};

TEST_F(CoordinatorRegistrationTest, RegistersItsHostAddressAndJobThenHeartbeats) {
  start_coordinator();
  CoordinatorRegistration registration(settings());
  ASSERT_TRUE(registration.start().ok());
  EXPECT_EQ(advertised_, 1) << "the address is read once, at start";
  ASSERT_TRUE(eventually([this] { return worker().has_value(); }));
  const podscope::v1::WorkerInfo registered = *worker();
  EXPECT_EQ(registered.address(), agent_.address());
  EXPECT_EQ(registered.job(), "train");
  EXPECT_TRUE(registered.up());
  EXPECT_TRUE(eventually([&] {
    const auto now = worker();
    return now && now->last_heartbeat_ns() > registered.last_heartbeat_ns();
  })) << "heartbeats at the interval the coordinator asked for";
  EXPECT_EQ(advertised_, 1);
}

TEST_F(CoordinatorRegistrationTest, RetriesWhileTheCoordinatorIsDownAndRegistersAgainWithARestartedOne) {
  start_coordinator();
  const int port = port_;
  stop_coordinator();
  CoordinatorRegistration registration(settings());
  ASSERT_TRUE(registration.start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a few retries into nothing
  start_coordinator(port);
  ASSERT_TRUE(eventually([this] { return worker().has_value(); })) << "registered once the coordinator came up";

  stop_coordinator();  // a restart: the new coordinator knows no worker
  start_coordinator(port);
  EXPECT_TRUE(eventually([this] { return worker().has_value(); })) << "registered again";
}

TEST_F(CoordinatorRegistrationTest, StopCancelsACallTheCoordinatorNeverAnswers) {
  const testing::NeverAcceptingListener hung;  // connects, never answers: the call would wait its whole deadline
  RegistrationSettings s = settings();
  s.coordinator = hung.address();
  CoordinatorRegistration registration(std::move(s));
  ASSERT_TRUE(registration.start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto begin = std::chrono::steady_clock::now();
  registration.stop();
  // Waiting for the call would take the rest of its kRegisterTimeout (5 s).
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(2500));
}

TEST_F(CoordinatorRegistrationTest, TriggerReportsNameTheRegisteredHostAlsoAfterStop) {
  start_coordinator();
  CoordinatorRegistration registration(settings());
  podscope::v1::TriggerReport report;
  report.set_reason("slow_step");
  report.set_step_num(12);
  report.set_snapshot_id("snapshot-before");
  ::testing::internal::CaptureStderr();
  registration.report_trigger(report);  // not registered yet: the coordinator refuses it
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("not told of triggered snapshot snapshot-before"));
  EXPECT_THAT(log, HasSubstr("worker \"node7\" is registered by no agent"));

  ASSERT_TRUE(registration.start().ok());
  ASSERT_TRUE(eventually([this] { return worker().has_value(); }));
  registration.stop();
  report.set_snapshot_id("snapshot-after");
  ::testing::internal::CaptureStderr();
  registration.report_trigger(report);
  log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("coordinator told of triggered snapshot snapshot-after"));
}

TEST(AdvertisedAgentAddress, TheListenHostOrTheHostNameOnAllInterfaces) {
  EXPECT_EQ(advertised_agent_address("0.0.0.0:8466", 8466, "node7"), "node7:8466");
  EXPECT_EQ(advertised_agent_address("[::]:0", 41000, "node7"), "node7:41000");
  EXPECT_EQ(advertised_agent_address(":8466", 8466, "node7"), "node7:8466");
  EXPECT_EQ(advertised_agent_address("10.1.2.3:0", 41000, "node7"), "10.1.2.3:41000");
  EXPECT_EQ(advertised_agent_address("[fd00::5]:8466", 8466, "node7"), "[fd00::5]:8466");
}

TEST(NewInstanceId, IsA128BitHexNumberChosenAfreshEachTime) {
  const std::string a = new_instance_id();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(new_instance_id(), a);
}

}  // namespace
}  // namespace podscope::agent
