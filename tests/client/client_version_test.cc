// libpodscope against agents of other local protocol versions, over a real Unix socket: an agent of version
// 1 (which closes a Hello as an unknown frame) gets a version-1 connection and every step and annotation; an
// agent upgraded meanwhile is offered the current version again on reconnect; an agent that serves none of
// the client's versions refuses it, the refusal is logged and the program keeps running, unannotated; an
// agent older than input stages gets them as plain annotations named by the stage, and the client says so; an
// agent older than allocation records gets none of them, the rest of the capture intact, and the client says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <thread>

#include "client/podscope.h"
#include "tests/client/mini_agent.h"
#include "tests/client/versioned_agent.h"

namespace podscope {
namespace {

using namespace std::chrono_literals;
using testing::MiniAgent;
using testing::VersionedAgent;

class ClientVersionTest : public ::testing::Test {
 protected:
  void start_client() {
    Options o;
    o.cores = {2};
    o.socket_path = socket_;
    o.buffer_events = 1024;
    init(o);
  }
  void TearDown() override { shutdown(); }

  static bool capturing() { return detail::g_level.load() == detail::kCapturing; }
  static void annotate_steps(int64_t first, int64_t count) {
    for (int64_t s = first; s < first + count; ++s) {
      auto step_span = step(s);
      auto ar = all_reduce(s, 4096);
      std::this_thread::sleep_for(1ms);
    }
  }

  testing::ScratchDirectory dir_;
  std::string socket_ = dir_.file("agent.sock");
};

TEST_F(ClientVersionTest, NewerClientFallsBackToAVersionOneAgentAndItsAnnotationsArrive) {
  VersionedAgent agent(socket_, 1, 1);
  start_client();
  ASSERT_TRUE(testing::wait_for([&] { return !agent.registered_versions().empty(); }, 3s));
  EXPECT_EQ(agent.registered_versions(), std::vector<uint32_t>{1});
  EXPECT_EQ(agent.connections(), 2);  // the Hello, closed unanswered; then version 1
  ASSERT_EQ(agent.close_reasons().size(), 1u);
  EXPECT_EQ(agent.close_reasons()[0], "unknown frame type 6 in protocol version 1");
  EXPECT_TRUE(agent_connected());

  annotate_steps(0, 10);
  EXPECT_TRUE(testing::wait_for([&] { return agent.steps().size() == 10; }, 3s));

  agent.open_window(5);
  ASSERT_TRUE(testing::wait_for(capturing, 2s));
  annotate_steps(10, 5);
  agent.close_window(5);
  ASSERT_TRUE(testing::wait_for([&] { return agent.done_sessions() == std::vector<uint64_t>{5}; }, 3s));
  const auto events = agent.events();
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const local::EventMsg& e) { return e.kind == local::EventKind::kStep; }),
            5);
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const local::EventMsg& e) { return e.kind == local::EventKind::kAllReduce; }),
            5);
  // Everything it sent was version 1: the agent closed nothing more.
  EXPECT_EQ(agent.connections(), 2);
  EXPECT_EQ(agent.close_reasons().size(), 1u);
}

TEST_F(ClientVersionTest, AnAgentOlderThanInputStagesGetsThemAsPlainAnnotationsAndTheClientSaysSo) {
  const uint32_t without_stages = 2;
  ASSERT_FALSE(local::version_has(without_stages, local::FrameType::kInputStages));
  ASSERT_TRUE(local::version_has(without_stages + 1, local::FrameType::kInputStages));
  VersionedAgent agent(socket_, local::kOldestProtocolVersion, without_stages);
  ::testing::internal::CaptureStderr();
  start_client();
  ASSERT_TRUE(testing::wait_for([&] { return !agent.registered_versions().empty(); }, 3s));
  EXPECT_EQ(agent.registered_versions(), std::vector<uint32_t>{without_stages});
  agent.open_window(8);
  ASSERT_TRUE(testing::wait_for(capturing, 2s));
  for (int64_t s = 0; s < 3; ++s) {
    auto step_span = step(s);
    auto batch = input_stage(intern("batch"), InputStageCategory::kPreprocess);
    EXPECT_NE(batch.input_stage_id(), 0u);
    auto read = input_stage(intern("read_shard"), InputStageCategory::kRead, batch.input_stage_id());
  }
  agent.close_window(8);
  ASSERT_TRUE(testing::wait_for([&] { return agent.done_sessions() == std::vector<uint64_t>{8}; }, 3s));
  const std::string log = ::testing::internal::GetCapturedStderr();
  std::map<std::string, int> annotations;
  for (const local::EventMsg& e : agent.events())
    if (e.kind == local::EventKind::kFreeForm) ++annotations[agent.names()[e.id]];
  EXPECT_EQ(annotations, (std::map<std::string, int>{{"batch", 3}, {"read_shard", 3}}));
  EXPECT_TRUE(agent.close_reasons().empty()) << "nothing the old agent cannot read was sent";
  EXPECT_EQ(agent.connections(), 1);
  EXPECT_NE(
      log.find("podscope: the agent at " + socket_ + " speaks local protocol version " +
               std::to_string(without_stages) + "; input stages need version " + std::to_string(without_stages + 1) +
               ", so they are sent as plain annotations, without category or parent, until the agent is "
               "upgraded"),
      std::string::npos)
      << log;
}

TEST_F(ClientVersionTest, AnAgentOlderThanAllocationRecordsGetsTheRestOfTheCaptureAndTheClientSaysSoOnce) {
  const uint32_t without_allocations = 3;
  ASSERT_FALSE(local::version_has(without_allocations, local::FrameType::kAllocations));
  VersionedAgent agent(socket_, local::kOldestProtocolVersion, without_allocations);
  ::testing::internal::CaptureStderr();
  start_client();
  ASSERT_TRUE(testing::wait_for([&] { return !agent.registered_versions().empty(); }, 3s));
  agent.open_window(9);
  ASSERT_TRUE(testing::wait_for(capturing, 2s));
  const NameId pool = intern("host_pinned");
  for (int64_t s = 0; s < 3; ++s) {
    auto step_span = step(s);
    alloc(4096, 0x1000 + static_cast<uint64_t>(s), pool);
    free(0x1000 + static_cast<uint64_t>(s), pool);
  }
  agent.close_window(9);
  ASSERT_TRUE(testing::wait_for([&] { return agent.done_sessions() == std::vector<uint64_t>{9}; }, 3s));
  const std::string log = ::testing::internal::GetCapturedStderr();
  const auto events = agent.events();
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const local::EventMsg& e) { return e.kind == local::EventKind::kStep; }),
            3);
  EXPECT_TRUE(agent.close_reasons().empty()) << "nothing the old agent cannot read was sent";
  EXPECT_EQ(agent.connections(), 1);
  const std::string said = "podscope: the agent at " + socket_ + " speaks local protocol version " +
                           std::to_string(without_allocations) + "; allocation records need version " +
                           std::to_string(without_allocations + 1) +
                           ", so they are dropped until the agent is upgraded";
  const size_t at = log.find(said);
  EXPECT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find(said, at + 1), std::string::npos) << "said once: " << log;
}

TEST_F(ClientVersionTest, AgentUpgradedMeanwhileIsOfferedTheCurrentVersionOnReconnect) {
  auto old_agent = std::make_unique<VersionedAgent>(socket_, 1, 1);
  start_client();
  ASSERT_TRUE(testing::wait_for([&] { return !old_agent->registered_versions().empty(); }, 3s));
  old_agent.reset();
  VersionedAgent upgraded(socket_, local::kOldestProtocolVersion, local::kProtocolVersion);
  ASSERT_TRUE(testing::wait_for([&] { return !upgraded.registered_versions().empty(); }, 5s));
  EXPECT_EQ(upgraded.registered_versions(), std::vector<uint32_t>{local::kProtocolVersion});
  EXPECT_EQ(upgraded.connections(), 1);
  EXPECT_TRUE(upgraded.close_reasons().empty());
}

TEST_F(ClientVersionTest, RefusedClientLogsWhyAndTheProgramKeepsRunningUnannotated) {
  // An agent of a future that no longer serves this client's versions.
  VersionedAgent agent(socket_, local::kProtocolVersion + 1, local::kProtocolVersion + 1);
  ::testing::internal::CaptureStderr();
  start_client();
  ASSERT_TRUE(testing::wait_for([&] { return !agent.close_reasons().empty(); }, 3s));
  const auto until = std::chrono::steady_clock::now() + 1s;
  int64_t steps = 0;
  while (std::chrono::steady_clock::now() < until) annotate_steps(steps++, 1);
  const std::string log = ::testing::internal::GetCapturedStderr();
  const std::string offered =
      std::to_string(local::kOldestProtocolVersion) + ".." + std::to_string(local::kProtocolVersion);
  const std::string served =
      std::to_string(local::kProtocolVersion + 1) + ".." + std::to_string(local::kProtocolVersion + 1);
  EXPECT_NE(log.find("podscope: the agent at " + socket_ + " refused protocol versions " + offered + " (it serves " +
                     served + "): versions do not overlap; annotations stay off, retrying in 10 s"),
            std::string::npos)
      << log;
  EXPECT_FALSE(agent_connected());
  EXPECT_GT(steps, 100);
  EXPECT_TRUE(agent.registered_versions().empty());
  EXPECT_TRUE(agent.steps().empty());
  // A refusal is not an agent older than negotiation: no fallback, no retry storm.
  EXPECT_EQ(agent.connections(), 1);
  EXPECT_EQ(agent.close_reasons(), std::vector<std::string>{"refused versions " + offered});
}

}  // namespace
}  // namespace podscope
