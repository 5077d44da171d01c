// libpodscope against the real local-socket server (in process, real Unix socket): registration at the
// current protocol version, step batches without a capture, a capture window's events as planes, input
// stages (C++ and C ABI, nested across threads) on the Input Pipeline line with their tree, buffer overflow
// counted, and an agent that goes away and comes back. Each test inits and shuts down libpodscope.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <set>
#include <thread>

#include "client/podscope.h"
#include "client/podscope_c.h"
#include "tests/client/mini_agent.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope {
namespace {

using namespace std::chrono_literals;
using testing::MiniAgent;

class ClientLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agent_.start();
    Options o;
    o.cores = {5};
    o.job = "unit";
    o.socket_path = dir_.file("agent.sock");
    o.buffer_events = 1024;
    init(o);
    ASSERT_TRUE(testing::wait_for([&] { return agent_.registry().clients().size() == 1; }, 3s));
  }
  void TearDown() override { shutdown(); }

  static bool capturing() { return detail::g_level.load() == detail::kCapturing; }

  testing::ScratchDirectory dir_;
  MiniAgent agent_{dir_.file("agent.sock")};
};

TEST_F(ClientLinkTest, RegistersWithPidCoresAndJob) {
  const auto clients = agent_.registry().clients();
  ASSERT_EQ(clients.size(), 1u);
  EXPECT_EQ(clients[0].pid, ::getpid());
  EXPECT_EQ(clients[0].cores, (std::vector<int32_t>{5}));
  EXPECT_EQ(clients[0].job, "unit");
  EXPECT_EQ(clients[0].protocol_version, local::kProtocolVersion);
  EXPECT_TRUE(agent_connected());
}

TEST_F(ClientLinkTest, StepsAreSentWithoutACapture) {
  for (int64_t s = 0; s < 20; ++s) {
    auto step_span = step(s);
    {
      auto in = infeed();
      std::this_thread::sleep_for(1ms);
    }
    auto ar = all_reduce(s, 64);
  }
  ASSERT_TRUE(testing::wait_for([&] { return agent_.steps_of(::getpid()).size() == 20; }, 3s));
  const auto steps = agent_.steps_of(::getpid());
  for (int64_t s = 0; s < 20; ++s) {
    EXPECT_EQ(steps[s].step_num, s);
    EXPECT_EQ(steps[s].core, 5);
    EXPECT_GE(steps[s].infeed_ns, 900'000);  // the 1 ms sleep inside infeed
    EXPECT_LT(steps[s].infeed_ns, steps[s].end_ns - steps[s].begin_ns + 1);
    EXPECT_GT(steps[s].begin_ns, 1'600'000'000'000'000'000);  // Unix ns
  }
}

TEST_F(ClientLinkTest, TinyStepsAtFullSpeedTravelInFramesTheAgentAccepts) {
  // A ring large enough that one drain holds far more steps than one frame may carry.
  shutdown();
  Options o;
  o.cores = {5};
  o.socket_path = dir_.file("agent.sock");
  o.buffer_events = 1 << 17;
  init(o);
  ASSERT_TRUE(testing::wait_for([&] { return agent_.registry().clients().size() == 1; }, 3s));
  // Steps are recorded from the level the agent's answer to the registration sets; on a loaded machine that
  // answer can arrive after the agent counts the client, and steps before it are not recorded at all.
  ASSERT_TRUE(testing::wait_for([] { return detail::g_level.load() >= detail::kStepSpansOnly; }, 3s));
  const uint64_t connection = agent_.registry().clients()[0].connection;
  constexpr int64_t kSteps = 100'000;
  const uint64_t dropped_before = dropped_events();
  for (int64_t s = 0; s < kSteps; ++s) {
    auto step_span = step(s);
  }
  ASSERT_TRUE(testing::wait_for(
      [&] { return agent_.steps_of(::getpid()).size() + (dropped_events() - dropped_before) >= kSteps; }, 10s))
      << agent_.steps_of(::getpid()).size() << " steps arrived";
  ASSERT_EQ(agent_.registry().clients().size(), 1u);
  EXPECT_EQ(agent_.registry().clients()[0].connection, connection) << "the agent never closed the link";
  EXPECT_GT(agent_.steps_of(::getpid()).size(), 16384u);
}

TEST_F(ClientLinkTest, CaptureWindowEventsBecomeCorePlanes) {
  auto space = agent_.capture(300ms, [&] {
    ASSERT_TRUE(testing::wait_for(capturing, 2s));
    const NameId matmul = intern("matmul");
    for (int64_t s = 0; s < 3; ++s) {
      auto st = step(s);
      { auto c = compute(matmul, 1000, 64); }
      { auto snd = send(7, 6, 128); }
      { auto r = recv_done(9, 6, 128); }
    }
    std::thread other([] {
      set_thread_core(6);
      auto st = step(0);
      auto t = trace(intern("other-core-work"));
    });
    other.join();
  });
  const auto* plane5 = xspace::find_plane(space, "/device:CUSTOM:5");
  const auto* plane6 = xspace::find_plane(space, "/device:CUSTOM:6");
  ASSERT_NE(plane5, nullptr);
  ASSERT_NE(plane6, nullptr);
  xspace::XPlaneReader reader(*plane5);
  int steps = 0, sends = 0, recvs = 0, matmuls = 0;
  for (const auto& line : plane5->lines()) {
    reader.for_each_event(line, [&](const xspace::XEventView& e) {
      if (line.name() == xspace::kStepsLineName) {
        EXPECT_EQ(e.int_stat(xspace::kStepNumStat), steps);
        ++steps;
        return;
      }
      EXPECT_TRUE(e.int_stat(xspace::kStepNumStat)) << e.name();
      if (e.name() == "send") {
        ++sends;
        EXPECT_EQ(e.int_stat(xspace::kChannelIdStat), 7);
        EXPECT_EQ(e.int_stat(xspace::kDstCoreStat), 6);
        EXPECT_EQ(e.int_stat(xspace::kSrcCoreStat), 5);
      }
      if (e.name() == "recv-done") ++recvs;
      if (e.name() == "matmul") {
        ++matmuls;
        EXPECT_EQ(e.int_stat(xspace::kFlopsStat), 1000);
        EXPECT_EQ(e.int_stat(xspace::kBytesStat), 64);
      }
    });
  }
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(sends, 3);
  EXPECT_EQ(recvs, 3);
  EXPECT_EQ(matmuls, 3);
  EXPECT_TRUE(space.warnings().empty());
  // After the window, fine-grained spans record nothing.
  ASSERT_TRUE(testing::wait_for([] { return !capturing(); }, 1s));
  EXPECT_FALSE(send(1, 2, 3).recording());
}

TEST_F(ClientLinkTest, InputStagesArriveAsATreeOnTheInputPipelineLine) {
  // Outside a capture a stage records nothing and has no id: stages naming it as parent are roots.
  EXPECT_EQ(input_stage(intern("early"), InputStageCategory::kRead).input_stage_id(), 0u);

  uint64_t batch_id = 0, worker_read_id = 0, c_decode_id = 0;
  auto space = agent_.capture(300ms, [&] {
    ASSERT_TRUE(testing::wait_for(capturing, 2s));
    const NameId batch_name = intern("batch"), read_name = intern("read_shard"), copy_name = intern("to_device");
    auto st = step(0);
    auto in = infeed();
    auto batch = input_stage(batch_name, InputStageCategory::kPreprocess);
    batch_id = batch.input_stage_id();
    std::thread worker([&] {  // a loader worker reads for the batch on its own thread
      auto read = input_stage(read_name, InputStageCategory::kRead, batch_id);
      worker_read_id = read.input_stage_id();
      std::this_thread::sleep_for(2ms);
    });
    worker.join();
    podscope_span decode = podscope_begin_input_stage(podscope_intern("decode"), PODSCOPE_INPUT_PREPROCESS, batch_id);
    c_decode_id = podscope_input_stage_id(&decode);
    podscope_end(&decode);
    podscope_span wrong = podscope_begin_input_stage(podscope_intern("decode"), 3, batch_id);
    EXPECT_EQ(podscope_input_stage_id(&wrong), 0u) << "an unknown category gives an inert span";
    podscope_end(&wrong);
    { auto copy = input_stage(copy_name, InputStageCategory::kEnqueue, batch_id); }
  });
  EXPECT_NE(batch_id, 0u);
  EXPECT_EQ(std::set<uint64_t>({batch_id, worker_read_id, c_decode_id}).size(), 3u) << "ids are unique";

  const auto* plane = xspace::find_plane(space, "/device:CUSTOM:5");
  ASSERT_NE(plane, nullptr);
  xspace::XPlaneReader reader(*plane);
  const auto* line = reader.find_line(xspace::kInputPipelineLineName);
  ASSERT_NE(line, nullptr);
  struct Stage {
    std::string category;
    int64_t id = 0, parent = -1, step = -1, duration_ns = 0;
  };
  std::map<std::string, Stage> stages;
  reader.for_each_event(*line, [&](const xspace::XEventView& e) {
    stages[std::string(e.name())] = {std::string(e.str_stat(xspace::kInputStageCategoryStat).value_or("")),
                                     e.int_stat(xspace::kInputStageIdStat).value_or(0),
                                     e.int_stat(xspace::kInputStageParentIdStat).value_or(-1),
                                     e.int_stat(xspace::kStepNumStat).value_or(-1), e.duration_ns()};
  });
  ASSERT_EQ(stages.size(), 4u);
  const auto root = static_cast<int64_t>(batch_id);
  EXPECT_EQ(stages["batch"].category, "preprocess");
  EXPECT_EQ(stages["batch"].id, root);
  EXPECT_EQ(stages["batch"].parent, 0);
  EXPECT_EQ(stages["read_shard"].category, "read");
  EXPECT_EQ(stages["read_shard"].id, static_cast<int64_t>(worker_read_id));
  EXPECT_EQ(stages["read_shard"].parent, root);
  EXPECT_GE(stages["read_shard"].duration_ns, 2'000'000);
  EXPECT_EQ(stages["decode"].category, "preprocess");
  EXPECT_EQ(stages["decode"].id, static_cast<int64_t>(c_decode_id));
  EXPECT_EQ(stages["decode"].parent, root);
  EXPECT_EQ(stages["to_device"].category, "enqueue");
  EXPECT_EQ(stages["to_device"].parent, root);
  for (const auto& [name, stage] : stages) EXPECT_EQ(stage.step, 0) << name;
  EXPECT_TRUE(space.warnings().empty());
}

TEST_F(ClientLinkTest, ACaptureClosingMidStepWaitsForTheStepToEnd) {
  std::thread trainer;
  auto space = agent_.capture(150ms, [&] {
    ASSERT_TRUE(testing::wait_for(capturing, 2s));
    trainer = std::thread([] {
      auto st = step(77);
      { auto snd = send(1, 2, 3); }
      std::this_thread::sleep_for(400ms);  // the window closes while this step runs
    });
  });
  trainer.join();
  const auto* plane = xspace::find_plane(space, "/device:CUSTOM:5");
  ASSERT_NE(plane, nullptr);
  xspace::XPlaneReader reader(*plane);
  bool step_seen = false, send_seen = false;
  for (const auto& line : plane->lines()) {
    reader.for_each_event(line, [&](const xspace::XEventView& e) {
      if (line.name() == xspace::kStepsLineName) step_seen = e.int_stat(xspace::kStepNumStat) == 77;
      if (e.name() == "send") send_seen = e.int_stat(xspace::kStepNumStat) == 77;
    });
  }
  EXPECT_TRUE(step_seen);
  EXPECT_TRUE(send_seen);
}

TEST_F(ClientLinkTest, FullBuffersDropAndTheCaptureSaysSo) {
  auto space = agent_.capture(200ms, [&] {
    ASSERT_TRUE(testing::wait_for(capturing, 2s));
    for (int i = 0; i < 20000; ++i) auto s = send(1, 2, 3);  // 1024-record ring, drained every 50 ms
  });
  EXPECT_GT(dropped_events(), 0u);
  ASSERT_GE(space.warnings_size(), 1);
  EXPECT_NE(space.warnings(0).find("because its buffers were full"), std::string::npos);
  EXPECT_GT(agent_.dropped(), 0u);
}

TEST_F(ClientLinkTest, AgentRestartNeverBlocksAndReconnects) {
  agent_.stop();
  ASSERT_TRUE(testing::wait_for([] { return !agent_connected(); }, 2s));
  // Annotating with no agent: nothing recorded, nothing blocks.
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < 10000; ++s) auto st = step(s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms);
  agent_.start();
  // Backoff is capped at 1 s.
  ASSERT_TRUE(testing::wait_for([&] { return agent_.registry().clients().size() == 1; }, 1500ms));
  auto space = agent_.capture(150ms, [&] {
    ASSERT_TRUE(testing::wait_for(capturing, 2s));
    auto st = step(42);
    auto snd = send(3, 4, 5);
  });
  EXPECT_NE(xspace::find_plane(space, "/device:CUSTOM:5"), nullptr);
}

// A process's framework profiler server, announced once: the agent knows it while the process is connected,
// not after it went away, and again once it reconnects (to a restarted agent, say).
TEST_F(ClientLinkTest, AnAnnouncedProfilerServerIsKnownWhileConnectedAndToldAgainAfterAReconnect) {
  EXPECT_EQ(podscope_announce_profiler(0), -1);
  EXPECT_EQ(podscope_announce_profiler(65536), -1);
  ASSERT_EQ(podscope_announce_profiler(6009), 0);
  const std::vector<std::string> announced = {"127.0.0.1:6009"};
  ASSERT_TRUE(testing::wait_for([&] { return agent_.registry().profiler_servers() == announced; }, 2s));
  EXPECT_EQ(agent_.registry().clients().at(0).profiler_port, 6009);
  agent_.stop();
  ASSERT_TRUE(testing::wait_for([] { return !agent_connected(); }, 2s));
  EXPECT_TRUE(agent_.registry().profiler_servers().empty());
  agent_.start();
  EXPECT_TRUE(testing::wait_for([&] { return agent_.registry().profiler_servers() == announced; }, 3s));
}

}  // namespace
}  // namespace podscope
