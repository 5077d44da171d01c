// ring_trainer ranks annotated with libpodscope against the real podscope-agent binary: each negotiates the
// current local protocol version; a Profile capture returns every rank's core plane with consecutive steps,
// all-reduce / send / recv-done events carrying their stats, and matching send and recv-done counts per
// channel; input stages of each step on the Input Pipeline line as a read → preprocess → enqueue tree inside
// the step's infeed, the injected slow stages on the slow rank only; the agent killed and restarted while
// trainers run (they keep stepping; the next capture works); a trainer killed (the agent forgets it).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include "podscope/v1/agent.grpc.pb.h"
#include "tensorflow/profiler_service.grpc.pb.h"
#include "tests/integration/agent_process.h"
#include "tests/integration/trainer_process.h"
#include "proto/local/frame_codec.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope {
namespace {

using namespace std::chrono_literals;
using tensorflow::profiler::XSpace;
using testing::AgentProcess;
using testing::TrainerProcess;
using testing::try_agent_status;
using testing::wait_for;

XSpace profile(const AgentProcess& agent, uint64_t duration_ms) {
  const testing::ProfileOutcome out = testing::profile(agent, testing::profile_request(duration_ms));
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
  return out.response.xspace();
}

std::vector<int32_t> client_pids(const AgentProcess& agent) {
  const std::optional<podscope::v1::AgentStatus> status = try_agent_status(agent);
  if (!status) return {};
  std::vector<int32_t> pids;
  for (const auto& c : status->clients()) pids.push_back(c.pid());
  return pids;
}

std::vector<std::unique_ptr<TrainerProcess>> start_ranks(int world, const std::string& socket,
                                                         std::vector<std::string> extra = {}) {
  const std::string peers = testing::peers_flag(testing::free_loopback_ports(world));
  std::vector<std::unique_ptr<TrainerProcess>> ranks;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> args = {
        "--world", std::to_string(world), "--rank", std::to_string(r),  "--peers", peers, "--matrix",
        "64",      "--grad_bytes",        "65536",  "--progress_every", "20"};
    args.insert(args.end(), extra.begin(), extra.end());
    ranks.push_back(std::make_unique<TrainerProcess>(args, socket));
  }
  return ranks;
}

struct CoreSummary {
  std::vector<int64_t> steps;
  int all_reduces = 0;
  std::map<int64_t, int> sends_by_channel, recvs_by_channel;  // only inside `counted` steps
};

CoreSummary summarize(const tensorflow::profiler::XPlane& plane, const std::set<int64_t>& counted) {
  CoreSummary s;
  xspace::XPlaneReader reader(plane);
  for (const auto& line : plane.lines()) {
    reader.for_each_event(line, [&](const xspace::XEventView& e) {
      if (line.name() == xspace::kStepsLineName) {
        s.steps.push_back(*e.int_stat(xspace::kStepNumStat));
        return;
      }
      const auto step = e.int_stat(xspace::kStepNumStat);
      const std::string name(e.name());
      if (name == "all-reduce") {
        ++s.all_reduces;
        EXPECT_EQ(e.int_stat(xspace::kAllReduceIdStat), step);
        EXPECT_TRUE(e.str_stat(xspace::kReplicaGroupStat));
        EXPECT_GT(e.int_stat(xspace::kBytesStat).value_or(0), 0);
      }
      if (name == "send" || name == "recv-done") {
        EXPECT_TRUE(step) << name;
        EXPECT_TRUE(e.int_stat(xspace::kChannelIdStat));
        EXPECT_GT(e.int_stat(xspace::kBytesStat).value_or(0), 0);
        EXPECT_TRUE(e.int_stat(xspace::kSrcCoreStat));
        EXPECT_TRUE(e.int_stat(xspace::kDstCoreStat));
        if (step && counted.count(*step)) {
          auto& m = name == "send" ? s.sends_by_channel : s.recvs_by_channel;
          ++m[*e.int_stat(xspace::kChannelIdStat)];
        }
      }
    });
  }
  std::sort(s.steps.begin(), s.steps.end());
  return s;
}

TEST(TrainerAgent, ProfileReturnsEveryRanksStepsCollectivesAndChannels) {
  AgentProcess agent({"--sample_interval_ms", "100"});
  const std::string socket = agent.socket_dir() + "/agent.sock";
  constexpr int kWorld = 3;
  auto ranks = start_ranks(kWorld, socket);
  ASSERT_TRUE(wait_for([&] { return client_pids(agent).size() == kWorld; }, 10s)) << agent.output();
  // Every rank's libpodscope negotiated the current local protocol version, and no connection was closed.
  const std::string negotiated = "protocol version " + std::to_string(local::kProtocolVersion);
  EXPECT_TRUE(wait_for(
      [&] {
        agent.read_some(20);
        size_t n = 0;
        for (size_t at = agent.output().find(negotiated); at != std::string::npos;
             at = agent.output().find(negotiated, at + 1))
          ++n;
        return n == kWorld;
      },
      5s))
      << agent.output();
  EXPECT_EQ(agent.output().find("closing local client"), std::string::npos) << agent.output();
  std::this_thread::sleep_for(300ms);  // past ring formation
  const XSpace space = profile(agent, 600);

  // Steps every rank ran completely inside the window (not the first or last one seen).
  std::map<int, std::vector<int64_t>> steps_of;
  for (int r = 0; r < kWorld; ++r) {
    const auto* plane = xspace::find_plane(space, "/device:CUSTOM:" + std::to_string(r));
    ASSERT_NE(plane, nullptr) << "rank " << r;
    EXPECT_EQ(plane->id(), r);
    steps_of[r] = summarize(*plane, {}).steps;
    ASSERT_GE(steps_of[r].size(), 5u) << "rank " << r;
    for (size_t i = 1; i < steps_of[r].size(); ++i) EXPECT_EQ(steps_of[r][i], steps_of[r][i - 1] + 1);
  }
  std::set<int64_t> counted;
  for (int64_t s = steps_of[0].front() + 1; s < steps_of[0].back(); ++s) {
    bool everywhere = true;
    for (int r = 1; r < kWorld; ++r) everywhere &= s > steps_of[r].front() && s < steps_of[r].back();
    if (everywhere) counted.insert(s);
  }
  ASSERT_GE(counted.size(), 3u);

  std::map<int64_t, int> sends, recvs;
  for (int r = 0; r < kWorld; ++r) {
    const CoreSummary c = summarize(*xspace::find_plane(space, "/device:CUSTOM:" + std::to_string(r)), counted);
    EXPECT_GE(c.all_reduces, static_cast<int>(counted.size()));
    for (auto [ch, n] : c.sends_by_channel) sends[ch] += n;
    for (auto [ch, n] : c.recvs_by_channel) recvs[ch] += n;
  }
  // 2(N−1) transfers per rank per step, each its own channel, matched by a recv-done on the next rank.
  EXPECT_EQ(sends.size(), static_cast<size_t>(2 * (kWorld - 1) * kWorld));
  EXPECT_EQ(sends, recvs);
  for (auto [ch, n] : sends) EXPECT_EQ(n, static_cast<int>(counted.size())) << "channel " << ch;

  // Continuous step metrics and per-process counters on /metrics.
  const std::string metrics = testing::http_get(agent.metrics_port(), "/metrics");
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(std::regex_search(metrics, std::regex("podscope_step_time_seconds_count\\{[^}]*core=\"" +
                                                      std::to_string(r) + "\"[^}]*\\} [1-9]")))
        << metrics;
    EXPECT_NE(metrics.find("podscope_process_resident_bytes{"), std::string::npos);
    EXPECT_NE(metrics.find("pid=\"" + std::to_string(ranks[r]->pid()) + "\""), std::string::npos);
  }
  EXPECT_NE(metrics.find("podscope_step_infeed_ratio{"), std::string::npos);
}

TEST(TrainerAgent, MonitorLevel2ReportsStepTimeAndInfeedShare) {
  AgentProcess agent({});
  const std::string socket = agent.socket_dir() + "/agent.sock";
  // The input pipeline takes 10 ms per batch: steps wait on infeed most of the time.
  auto ranks = start_ranks(2, socket, {"--input_delay_ms", "10"});
  ASSERT_TRUE(wait_for([&] { return client_pids(agent).size() == 2; }, 10s));
  std::this_thread::sleep_for(200ms);
  auto stub = tensorflow::ProfilerService::NewStub(agent.channel());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  tensorflow::MonitorRequest request;
  request.set_duration_ms(500);
  request.set_monitoring_level(2);
  tensorflow::MonitorResponse response;
  ASSERT_TRUE(stub->Monitor(&context, request, &response).ok());
  const auto& r = response.monitor_result();
  EXPECT_EQ(r.response_type(), tensorflow::ProfilerServiceMonitorResult::UTIL_IDLE_STEP) << response.data();
  EXPECT_GE(r.step_time_ms_avg(), 8.0) << response.data();
  EXPECT_LE(r.step_time_ms_min(), r.step_time_ms_max());
  EXPECT_GT(r.infeed_percent_avg(), 40.0) << response.data();
}

// One rank's input stages in a capture, and its infeed spans by step.
struct InputStageEvent {
  std::string name, category;
  int64_t id = 0, parent = -1, start_ns = 0, end_ns = 0;
  std::optional<int64_t> step;
};
struct RankInput {
  std::vector<InputStageEvent> stages;
  std::map<int64_t, std::pair<int64_t, int64_t>> infeed_by_step;  // step → [start, end] ns
};

RankInput rank_input(const tensorflow::profiler::XPlane& plane) {
  RankInput out;
  xspace::XPlaneReader reader(plane);
  for (const auto& line : plane.lines()) {
    reader.for_each_event(line, [&](const xspace::XEventView& e) {
      const auto step = e.int_stat(xspace::kStepNumStat);
      if (line.name() == xspace::kInputPipelineLineName) {
        out.stages.push_back({std::string(e.name()),
                              std::string(e.str_stat(xspace::kInputStageCategoryStat).value_or("")),
                              e.int_stat(xspace::kInputStageIdStat).value_or(0),
                              e.int_stat(xspace::kInputStageParentIdStat).value_or(-1), e.start_ns(),
                              e.start_ns() + e.duration_ns(), step});
      } else if (e.name() == xspace::kInfeedEventName && step) {
        out.infeed_by_step[*step] = {e.start_ns(), e.start_ns() + e.duration_ns()};
      }
    });
  }
  return out;
}

TEST(TrainerAgent, InputStagesOfEveryStepFormATreeInsideItsInfeedAndTheSlowStageShows) {
  AgentProcess agent({});
  const std::string socket = agent.socket_dir() + "/agent.sock";
  constexpr int kSlowRank = 1;
  constexpr int64_t kReadMs = 12, kPreprocessMs = 4;
  auto ranks = start_ranks(2, socket,
                           {"--slow_read_ms", std::to_string(kReadMs), "--slow_preprocess_ms",
                            std::to_string(kPreprocessMs), "--slow_input_rank", std::to_string(kSlowRank)});
  ASSERT_TRUE(wait_for([&] { return client_pids(agent).size() == 2; }, 10s)) << agent.output();
  std::this_thread::sleep_for(300ms);  // past ring formation
  const XSpace space = profile(agent, 800);

  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const auto* plane = xspace::find_plane(space, "/device:CUSTOM:" + std::to_string(rank));
    ASSERT_NE(plane, nullptr);
    const RankInput input = rank_input(*plane);
    std::map<int64_t, const InputStageEvent*> by_id;
    for (const auto& s : input.stages) EXPECT_TRUE(by_id.emplace(s.id, &s).second) << "stage id " << s.id << " twice";
    // Per step: one root batch stage holding read → preprocess → enqueue, inside the step's infeed.
    std::map<int64_t, std::vector<const InputStageEvent*>> children_of;
    int roots_in_infeed = 0;
    int64_t first_batch_ns = INT64_MAX, last_batch_ns = INT64_MIN;
    for (const auto& s : input.stages) {
      if (s.name != "input_batch") continue;
      first_batch_ns = std::min(first_batch_ns, s.start_ns);
      last_batch_ns = std::max(last_batch_ns, s.start_ns);
    }
    for (const auto& s : input.stages) {
      ASSERT_GT(s.id, 0);
      if (s.parent == 0 && s.name != "input_batch") {
        // A stage whose batch began before the window opened: its parent never recorded, so it is a root.
        EXPECT_LT(s.start_ns, first_batch_ns) << s.name;
        continue;
      }
      if (s.parent == 0) {
        EXPECT_EQ(s.category, "preprocess");
        const auto infeed = s.step ? input.infeed_by_step.find(*s.step) : input.infeed_by_step.end();
        if (infeed != input.infeed_by_step.end() && s.start_ns >= infeed->second.first &&
            s.end_ns <= infeed->second.second)
          ++roots_in_infeed;
        continue;
      }
      if (!by_id.count(s.parent)) {
        // A stage of the batch the window closed in: its parent ended after the close, so it was not recorded.
        EXPECT_GT(s.start_ns, last_batch_ns) << s.name << " names a parent that is not in the capture";
        continue;
      }
      const InputStageEvent& parent = *by_id.at(s.parent);
      EXPECT_EQ(parent.parent, 0);
      EXPECT_GE(s.start_ns, parent.start_ns);
      EXPECT_LE(s.end_ns, parent.end_ns);
      children_of[s.parent].push_back(&s);
    }
    ASSERT_GE(children_of.size(), 5u);
    // Every root lies inside its step's infeed span (on the training thread), but for those the window cut.
    EXPECT_GE(roots_in_infeed, static_cast<int>(children_of.size()) - 2);
    for (const auto& [parent, children] : children_of) {
      if (by_id.at(parent)->start_ns == last_batch_ns) continue;  // its later stages may start past the window
      ASSERT_EQ(children.size(), 3u) << "stage " << parent;
      const std::vector<std::pair<std::string, std::string>> expected = {
          {"read_batch", "read"}, {"normalize_batch", "preprocess"}, {"enqueue_batch", "enqueue"}};
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(std::make_pair(children[i]->name, children[i]->category), expected[i]);
        if (i > 0) {
          EXPECT_GE(children[i]->start_ns, children[i - 1]->end_ns) << "stages run in order";
        }
      }
      const int64_t read_ns = children[0]->end_ns - children[0]->start_ns;
      const int64_t preprocess_ns = children[1]->end_ns - children[1]->start_ns;
      if (rank == kSlowRank) {
        EXPECT_GE(read_ns, kReadMs * 1'000'000);
        EXPECT_GE(preprocess_ns, kPreprocessMs * 1'000'000);
      } else {
        EXPECT_LT(read_ns, kReadMs * 1'000'000);
      }
    }
  }
}

double max_step_ms_after(const std::string& output, size_t from) {
  static const std::regex kLine(R"(max ([0-9.]+) ms)");
  double worst = 0;
  const std::string tail = output.substr(std::min(from, output.size()));
  for (std::sregex_iterator it(tail.begin(), tail.end(), kLine), end; it != end; ++it)
    worst = std::max(worst, std::stod((*it)[1]));
  return worst;
}

TEST(TrainerAgent, AgentKilledAndRestartedWhileTrainersRun) {
  const testing::ScratchDirectory scratch("trainer_agent");
  const std::string dir = scratch.path();
  const std::string socket = dir + "/agent.sock";
  auto agent = std::make_unique<AgentProcess>(std::vector<std::string>{"--socket", socket});
  auto ranks = start_ranks(2, socket, {"--input_delay_ms", "2"});
  ASSERT_TRUE(wait_for([&] { return client_pids(*agent).size() == 2; }, 10s));
  std::this_thread::sleep_for(500ms);
  const size_t before = ranks[0]->output().size();
  const double baseline_max = max_step_ms_after(ranks[0]->output(), 0);

  agent.reset();  // SIGKILL: the socket file stays behind, stale
  const auto agent_gone = 1000ms;
  std::this_thread::sleep_for(agent_gone);
  agent = std::make_unique<AgentProcess>(std::vector<std::string>{"--socket", socket});
  ASSERT_TRUE(wait_for([&] { return client_pids(*agent).size() == 2; }, 5s)) << agent->output();
  const XSpace space = profile(*agent, 300);
  EXPECT_NE(xspace::find_plane(space, "/device:CUSTOM:0"), nullptr);
  EXPECT_NE(xspace::find_plane(space, "/device:CUSTOM:1"), nullptr);

  // The trainers kept stepping through it: steps finished while the agent was gone, and none waited for it to
  // come back (that step would take the whole second; a loaded 2-core machine stalls a step by 0.2 s at most).
  std::this_thread::sleep_for(200ms);
  for (auto& r : ranks) EXPECT_TRUE(r->running()) << r->output();
  const std::string out = ranks[0]->output();
  ASSERT_GT(out.size(), before);
  EXPECT_NE(out.find("agent absent", before), std::string::npos) << out;
  const double during_max = max_step_ms_after(out, before);
  EXPECT_LT(during_max, agent_gone.count() / 2.0) << "steps before the restart took at most " << baseline_max << " ms\n"
                                                  << out;
  std::system(("rm -rf " + dir).c_str());
}

TEST(TrainerAgent, KilledTrainerIsForgottenAndTheNextCaptureWorks) {
  AgentProcess agent({});
  const std::string socket = agent.socket_dir() + "/agent.sock";
  auto ranks = start_ranks(2, socket);
  ASSERT_TRUE(wait_for([&] { return client_pids(agent).size() == 2; }, 10s));
  const pid_t killed = ranks[1]->pid();
  ranks[1]->signal(SIGKILL);
  ASSERT_TRUE(ranks[1]->wait_exit(5s));
  ASSERT_TRUE(wait_for(
      [&] {
        auto pids = client_pids(agent);
        return std::find(pids.begin(), pids.end(), killed) == pids.end();
      },
      5s));
  const XSpace space = profile(agent, 200);  // OK status checked inside
  EXPECT_EQ(xspace::find_plane(space, "/device:CUSTOM:1"), nullptr);
  // Rank 0 lost its ring peer: it says so and exits with an error, and the agent forgets it too.
  EXPECT_TRUE(ranks[0]->wait_exit(10s));
  EXPECT_NE(ranks[0]->output().find("closed the ring"), std::string::npos) << ranks[0]->output();
  EXPECT_TRUE(wait_for([&] { return client_pids(agent).empty(); }, 5s));
}

TEST(TrainerAgent, SigtermStopsEveryRankAfterTheSameStepWithStatusZero) {
  const testing::ScratchDirectory scratch("trainer_agent");
  const std::string dir = scratch.path();
  // Every rank's own free port (not base_port + r, which another test may hold), and the signal only once the
  // ring has formed on all three: a loaded box may take seconds to start them.
  const auto ports = testing::free_loopback_ports(3);
  TrainerProcess launcher(
      {"--spawn", "--world", "3", "--peers", testing::peers_flag(ports), "--matrix", "32", "--progress_every", "0"},
      dir + "/absent.sock");
  const auto formed_by = std::chrono::steady_clock::now() + 60s;
  auto rings_formed = [&] {
    const std::string& out = launcher.output();
    size_t n = 0;
    for (size_t at = out.find("ring formed"); at != std::string::npos; at = out.find("ring formed", at + 1)) ++n;
    return n;
  };
  while (rings_formed() < 3 && launcher.running() && std::chrono::steady_clock::now() < formed_by)
    std::this_thread::sleep_for(20ms);
  ASSERT_EQ(rings_formed(), 3u) << launcher.output();
  std::this_thread::sleep_for(200ms);
  launcher.signal(SIGTERM);
  const auto status = launcher.wait_exit(10s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << launcher.output();
  static const std::regex kStop(R"(stopping after step (\d+))");
  std::set<std::string> steps;
  const std::string out = launcher.output();
  for (std::sregex_iterator it(out.begin(), out.end(), kStop), end; it != end; ++it) steps.insert((*it)[1]);
  EXPECT_EQ(steps.size(), 1u) << out;
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace podscope
