// GetStatus's answer from real parts of an agent: who it is (host, version, start, capabilities), every collector by
// its state and reason, the clock's health, the running capture, the flight recorder off and on with its stored
// snapshots, the registered local clients, every reason the local socket refuses for (also those never counted),
// and no Kineto status while the endpoint is off.
#include "agent/service/agent_status.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "agent/capture/capture_session.h"
#include "agent/capture/repository_quota.h"
#include "agent/collectors/clock_health_collector.h"
#include "agent/collectors/loadavg_collector.h"
#include "agent/kineto/kineto_processes.h"
#include "agent/local/local_socket_counters.h"
#include "agent/recorder/triggered_snapshots.h"
#include "tests/agent/collectors/recording_sink.h"
#include "tests/agent/recorder/recorder_parts.h"

namespace podscope::agent {
namespace {

constexpr int64_t kStarted = 1'700'000'000'000'000'000;

class AgentStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::RecordingSink sink;
    clock_health_.sample(parts_.clock.now_ns(), sink);
    malformed_.sample(parts_.clock.now_ns(), sink);
  }
  podscope::v1::AgentStatus status() {
    podscope::v1::AgentStatus s;
    fill_agent_status({parts_.host_name, kStarted, parts_.clock, collectors_, clock_health_, captures_, parts_.recorder,
                       snapshots_, *parts_.clients, socket_counters_, nullptr, nullptr, kineto_},
                      s);
    return s;
  }

  testing::RecorderParts parts_;
  ClockHealthCollector clock_health_;
  LoadAvgCollector malformed_{std::string(PODSCOPE_SOURCE_DIR) + "/tests/data/proc/loadavg_malformed"};
  const std::vector<const Collector*> collectors_{&clock_health_, &malformed_};
  RepositoryQuota quota_{size_t{1} << 20};
  CaptureSessions captures_{parts_.clock, parts_.host_name, [this] { return parts_.clock.now_ns(); }, quota_};
  TriggeredSnapshots snapshots_{parts_.recorder, parts_.clients, parts_.clock, parts_.host_name, {}, parts_.metrics};
  LocalSocketCounters socket_counters_{parts_.metrics, parts_.host_name};
  KinetoProcesses kineto_;
};

TEST_F(AgentStatusTest, NamesTheAgentAndEveryCollectorByItsState) {
  const podscope::v1::AgentStatus s = status();
  EXPECT_EQ(s.host_name(), "h");
  EXPECT_EQ(s.version(), PODSCOPE_VERSION);
  EXPECT_EQ(s.start_time_ns(), kStarted);
  EXPECT_EQ(
      std::vector<std::string>(s.capabilities().begin(), s.capabilities().end()),
      (std::vector<std::string>{"tensorflow.ProfilerService", "tensorflow.ProfileAnalysis", "podscope.v1.Agent"}));
  ASSERT_EQ(s.collectors_size(), 2);
  EXPECT_EQ(s.collectors(0).name(), "clock");
  EXPECT_EQ(s.collectors(1).name(), malformed_.name());
  EXPECT_EQ(s.collectors(1).state(), podscope::v1::CollectorStatus::DEGRADED);
  EXPECT_EQ(s.collectors(1).reason(), malformed_.status().reason);
  EXPECT_NE(s.collectors(1).reason().find("not a number"), std::string::npos) << s.collectors(1).reason();
  const ClockHealth clock = clock_health_.health();
  EXPECT_EQ(s.clock_synchronized(), clock.synchronized);
  EXPECT_EQ(s.clock_detail(), clock.detail);
  EXPECT_FALSE(s.clock_detail().empty());
  EXPECT_TRUE(s.capture_session_id().empty()) << "no capture running";
}

TEST_F(AgentStatusTest, TheFlightRecorderOffAndOn) {
  podscope::v1::AgentStatus s = status();
  EXPECT_FALSE(s.flight_recorder().on());
  EXPECT_EQ(s.flight_recorder().window_ms(), 0);
  EXPECT_EQ(s.flight_recorder().snapshots_triggered(), 0u);
  EXPECT_EQ(s.flight_recorder().snapshots_size(), 0);

  ASSERT_TRUE(parts_.recorder.start(FlightRecorderSettings{10'000'000'000, size_t{8} << 20}).ok());
  s = status();
  EXPECT_TRUE(s.flight_recorder().on());
  EXPECT_EQ(s.flight_recorder().window_ms(), 10'000);
  EXPECT_EQ(s.flight_recorder().max_bytes(), size_t{8} << 20);
  EXPECT_EQ(s.flight_recorder().held_events(), 0u);
  EXPECT_EQ(s.flight_recorder().processes_size(), 0) << "no client recorded anything";
}

TEST_F(AgentStatusTest, RegisteredClientsAndEveryReasonTheLocalSocketRefusesFor) {
  const uint64_t connection = parts_.clients->add_connection(
      4242, ::getuid(), [](std::string) {}, [] {});
  parts_.clients->add_connection(
      4343, ::getuid(), [](std::string) {}, [] {});  // connected, never registered: not a client
  parts_.clients->on_register(connection, {local::kProtocolVersion, 4242, "trainer", "bert", {0, 1}});
  socket_counters_.refused(LocalRefusal::kUntrusted);
  socket_counters_.refused(LocalRefusal::kUntrusted);

  const podscope::v1::AgentStatus s = status();
  ASSERT_EQ(s.clients_size(), 1);
  EXPECT_EQ(s.clients(0).pid(), 4242);
  EXPECT_EQ(s.clients(0).program(), "trainer");
  EXPECT_EQ(s.clients(0).job(), "bert");
  EXPECT_EQ(std::vector<int32_t>(s.clients(0).core_ids().begin(), s.clients(0).core_ids().end()),
            (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(s.local_socket().refused_size(), static_cast<int>(kLocalRefusals.size()));
  for (const auto& refused : s.local_socket().refused()) {
    EXPECT_EQ(refused.count(), refused.reason() == refusal_name(LocalRefusal::kUntrusted) ? 2u : 0u)
        << refused.reason();
  }
}

TEST_F(AgentStatusTest, NoKinetoStatusWhileTheEndpointIsOff) {
  const podscope::v1::AgentStatus s = status();
  EXPECT_EQ(s.kineto().ByteSizeLong(), 0u);
}

}  // namespace
}  // namespace podscope::agent
