// Triggered snapshots of the real podscope-agent binary with real ring_trainer ranks (two fast ranks, `--matrix 64
// --grad_bytes 65536`, thousands of steps a second): a fresh agent + trainer start freezes nothing while the
// ranks warm up, nor spends its budget on the jitter just after; a real 50 ms step late in a run is captured even after
// a smaller slow step froze a snapshot and started the cool-down, in a snapshot whose span was fixed at the trigger (it
// ends the settle time after the slow step) and which holds that step; snapshots written under a repository root are
// found again by a restarted agent, listed and served, and all of them together stay within flight_recorder_disk_mb,
// while capture runs and other hosts' files beside them are left alone.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "agent/steps/slow_step_detector.h"
#include "podscope/v1/agent.grpc.pb.h"
#include "tensorflow/xplane.pb.h"
#include "tests/integration/agent_process.h"
#include "tests/integration/trainer_process.h"
#include "tests/proto/xspace/xspace_contents.h"

namespace podscope {
namespace {

using namespace std::chrono_literals;
using testing::agent_status;
using testing::AgentProcess;
using testing::TrainerProcess;
using testing::wait_for;

constexpr int64_t kSettleNs = 500'000'000;  // TriggeredSnapshotSettings::settle_ms

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<podscope::v1::StoredSnapshot> snapshots_of(const AgentProcess& agent) {
  const podscope::v1::AgentStatus status = agent_status(agent);
  return {status.flight_recorder().snapshots().begin(), status.flight_recorder().snapshots().end()};
}

grpc::Status stored_snapshot(const AgentProcess& agent, const std::string& id,
                             podscope::v1::RecordedWindowResponse& response) {
  auto stub = podscope::v1::Agent::NewStub(agent.channel());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 30s);
  podscope::v1::StoredSnapshotRequest request;
  request.set_id(id);
  return stub->GetStoredSnapshot(&context, request, &response);
}

// The value of podscope_slow_steps_total{outcome} in the agent's /metrics.
double slow_steps(const AgentProcess& agent, const std::string& outcome) {
  const std::string body = testing::http_get(agent.metrics_port(), "/metrics");
  const std::regex series("podscope_slow_steps_total\\{[^}]*outcome=\"" + outcome + "\"[^}]*\\} ([0-9.e+]+)");
  std::smatch m;
  return std::regex_search(body, m, series) ? std::stod(m[1]) : -1;
}

const std::vector<std::string> kFast{"--matrix", "64", "--grad_bytes", "65536"};

// Two ranks with `common_args`; `per_rank_args[r]` are added to rank r's.
std::vector<std::unique_ptr<TrainerProcess>> start_ranks(const std::string& socket,
                                                         const std::vector<std::string>& common_args,
                                                         const std::vector<std::vector<std::string>>& per_rank_args) {
  const std::string peers = testing::peers_flag(testing::free_loopback_ports(2));
  std::vector<std::unique_ptr<TrainerProcess>> ranks;
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> args{"--world", "2",   "--rank",           std::to_string(r),
                                  "--peers", peers, "--progress_every", "100"};
    args.insert(args.end(), common_args.begin(), common_args.end());
    if (r < static_cast<int>(per_rank_args.size())) {
      args.insert(args.end(), per_rank_args[r].begin(), per_rank_args[r].end());
    }
    ranks.push_back(std::make_unique<TrainerProcess>(std::move(args), socket));
  }
  return ranks;
}

// Whether the XSpace holds a step of `step_ns` ending at `end_ns` on some annotated core.
bool holds_step(const std::string& serialized, int64_t end_ns, int64_t step_ns) {
  tensorflow::profiler::XSpace space;
  if (!space.ParseFromString(serialized)) return false;
  for (const auto& [core, steps] : testing::steps_by_core(space)) {
    for (const auto& [begin, end] : steps) {
      if (std::abs(end - end_ns) < 1'000'000 && std::abs(end - begin - step_ns) < 1'000) return true;
    }
  }
  return false;
}

TEST(TriggeredSnapshots, FreshStartsSpendNoSnapshotOnTheirWarmUpNorOnTheJitterAfterIt) {
  // The default trigger settings; three times a fresh agent and fresh ranks, each run 5 s past its warm-up. Before,
  // every such run spent the whole budget (3 snapshots) on scheduler stalls of 1.4-13 ms (on this box up to 30 ms)
  // in the 3 s after the warm-up: no louder than the stalls of the warm-up itself, which now set the bar.
  constexpr int64_t kWarmupNs = 2'000'000'000;
  constexpr int kStarts = 3;
  int frozen = 0;
  for (int start = 0; start < kStarts; ++start) {
    AgentProcess agent({"--sample_interval_ms", "100", "--flight_recorder_seconds", "10"});
    const int64_t started_ns = now_ns();
    auto ranks = start_ranks(agent.socket_dir() + "/agent.sock", kFast, {});
    ASSERT_TRUE(wait_for([&] { return agent_status(agent).clients_size() == 2; }, 20s)) << agent.output();
    std::this_thread::sleep_for(std::chrono::nanoseconds(kWarmupNs) + 5s);
    const podscope::v1::FlightRecorderStatus recorder = agent_status(agent).flight_recorder();
    for (const podscope::v1::StoredSnapshot& s : recorder.snapshots()) {
      EXPECT_GT(s.step_end_ns(), started_ns + kWarmupNs)
          << "start " << start << ": step " << s.step_num() << " of pid " << s.pid() << " froze " << s.id()
          << " during the warm-up (" << s.step_ns() << " ns against a median of " << s.median_ns() << " ns)";
      std::cerr << "start " << start << ": step " << s.step_num() << " froze " << s.id() << ", " << s.step_ns()
                << " ns against a median of " << s.median_ns() << " ns, " << (s.step_end_ns() - started_ns) / 1'000'000
                << " ms after the start\n";
    }
    frozen += recorder.snapshots_size();
    std::cerr << "start " << start << ": " << recorder.snapshots_size() << " snapshots; slow steps ignored while "
              << "warming up " << slow_steps(agent, "warming_up") << ", below the bar "
              << slow_steps(agent, "below_bar") << "\n";
  }
  // A stall louder than twice every stall of the warm-ups is not ruled out on a loaded box: once, not the budget.
  EXPECT_LE(frozen, 1) << "snapshots of " << kStarts << " fresh starts, of " << kStarts * 3 << " the budgets hold";
}

// From a rank's progress lines ("step N, X ms/step, max Y ms", N counting the steps done): the last N, and the
// longest step among the first `before` steps.
struct Progress {
  int64_t steps = -1;
  double max_ms_before = 0;
};
Progress progress_of(TrainerProcess& rank, int64_t before) {
  static const std::regex kProgress(R"(rank \d+: step (\d+), [\d.]+ ms/step, max ([\d.]+) ms)");
  const std::string& out = rank.output();
  Progress p;
  for (std::sregex_iterator it(out.begin(), out.end(), kProgress), end; it != end; ++it) {
    p.steps = std::stoll((*it)[1]);
    if (p.steps <= before) p.max_ms_before = std::max(p.max_ms_before, std::stod((*it)[2]));
  }
  return p;
}

TEST(TriggeredSnapshots, ARealFiftyMillisecondStepIsCapturedAfterNoiseStartedTheCooldown) {
  // Steps 15,000 (5 ms longer, on rank 0) and 30,000 (50 ms longer, on rank 1): seconds past the warm-up at
  // thousands of steps a second. Both ranks see both, the all-reduce waits for the slow one. With the default
  // 60 s cool-down, the first (or jitter before it) starts it; the 50 ms step must still freeze a snapshot.
  constexpr int64_t kNoiseStep = 15'000, kRealStep = 30'000, kRealStepNs = 50'000'000;
  AgentProcess agent({"--sample_interval_ms", "100", "--flight_recorder_seconds", "10"});
  auto ranks = start_ranks(agent.socket_dir() + "/agent.sock", kFast,
                           {{"--slow_steps", std::to_string(kNoiseStep) + ":1:5", "--slow_rank", "0"},
                            {"--slow_steps", std::to_string(kRealStep) + ":1:50", "--slow_rank", "1"}});
  ASSERT_TRUE(wait_for([&] { return agent_status(agent).clients_size() == 2; }, 20s)) << agent.output();
  ASSERT_TRUE(wait_for(
      [&] { return progress_of(*ranks[0], 0).steps > kRealStep && progress_of(*ranks[1], 0).steps > kRealStep; }, 240s))
      << ranks[0]->output() << ranks[1]->output();
  auto real_step_snapshot = [&agent]() -> std::optional<podscope::v1::StoredSnapshot> {
    for (const auto& s : snapshots_of(agent)) {
      if (s.step_num() == kRealStep) return s;
    }
    return std::nullopt;
  };
  // Frozen half a second after the step; a loaded host may take seconds to build 10 s of events.
  const bool captured = wait_for([&] { return real_step_snapshot().has_value(); }, 20s);
  const std::vector<podscope::v1::StoredSnapshot> all = snapshots_of(agent);
  int injected = 0;
  for (const podscope::v1::StoredSnapshot& s : all) {
    injected += s.step_num() == kNoiseStep || s.step_num() == kRealStep ? 1 : 0;
  }
  const double stall_before_ms =
      std::max(progress_of(*ranks[0], kRealStep).max_ms_before, progress_of(*ranks[1], kRealStep).max_ms_before);
  std::cerr << "trigger precision: " << injected << " of " << all.size() << " snapshots hold an injected slow step; "
            << "the 50 ms step " << (captured ? "captured" : "NOT captured") << "; the longest step before it "
            << stall_before_ms << " ms; snapshots within the cool-down " << slow_steps(agent, "within_cooldown")
            << ", slow steps covered by a snapshot " << slow_steps(agent, "covered") << ", below the bar "
            << slow_steps(agent, "below_bar") << ", ignored while warming up " << slow_steps(agent, "warming_up")
            << ", dropped (freezer busy) " << slow_steps(agent, "freezer_busy") << ", (too late) "
            << slow_steps(agent, "too_late") << "\n";
  if (!captured) {
    // The one reason the product gives for not capturing it: the host itself stalled a step at least half as slow
    // (relative to its median: the ranks' medians differ a little) within the cool-down before it, during a warm-up
    // or after the budget was spent, so the 50 ms step was not twice as slow as every one of them.
    ASSERT_GT(stall_before_ms, 0.4 * kRealStepNs / 1e6)
        << "the 50 ms step was not captured and no comparable stall came before it\n"
        << agent_status(agent).flight_recorder().DebugString() << agent.output();
    std::cerr << "the host spent the snapshot budget on its own stalls (the longest " << stall_before_ms
              << " ms) before the 50 ms step: not captured, as designed\n";
    return;
  }
  const podscope::v1::StoredSnapshot real = *real_step_snapshot();
  EXPECT_GT(real.step_ns(), kRealStepNs);
  // Frozen at the trigger: the span ends the settle time after the slow step and reaches back the window.
  EXPECT_EQ(real.end_ns(), real.step_end_ns() + kSettleNs);
  EXPECT_GE(real.start_ns(), real.end_ns() - 10'000'000'000);
  EXPECT_LT(real.start_ns(), real.step_end_ns() - real.step_ns());
  podscope::v1::RecordedWindowResponse served;
  ASSERT_TRUE(stored_snapshot(agent, real.id(), served).ok());
  EXPECT_TRUE(holds_step(served.xspace(), real.step_end_ns(), real.step_ns())) << real.DebugString();
  if (all.size() > 1 && all.front().id() != real.id()) {
    EXPECT_GE(slow_steps(agent, "within_cooldown"), 1) << "the 50 ms step came inside the cool-down of an earlier one";
  }
}

// This host's snapshot files under `runs` and their total size.
uint64_t disk_bytes_of(const std::filesystem::path& runs, const std::string& host) {
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(runs)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.rfind(host + ".", 0) == 0 &&
        entry.path().parent_path().filename().string().find("_slow_step_") != std::string::npos) {
      bytes += entry.file_size();
    }
  }
  return bytes;
}

// The ids of the snapshots `host` has on disk under `runs`.
std::set<std::string> stored_on_disk(const std::filesystem::path& runs, const std::string& host) {
  std::set<std::string> ids;
  for (const auto& entry : std::filesystem::directory_iterator(runs)) {
    const std::string id = entry.path().filename().string();
    if (id.find("_slow_step_") != std::string::npos && std::filesystem::exists(entry.path() / (host + ".xplane.pb"))) {
      ids.insert(id);
    }
  }
  return ids;
}

TEST(TriggeredSnapshots, ARestartedAgentFindsItsSnapshotsAndKeepsAllOfThemWithinTheDiskCap) {
  const std::filesystem::path root = ::testing::TempDir() + "/restarts_" + std::to_string(::getpid());
  const std::filesystem::path runs = root / "plugins" / "profile";
  std::filesystem::remove_all(root);
  // Beside the snapshots: a capture's run, another host's snapshot and an unreadable description, all kept.
  const std::filesystem::path capture = runs / "2026_01_01_00_00_00" / "node0.xplane.pb";
  const std::filesystem::path other_host = runs / "2026_01_01_00_00_01_slow_step_1" / "other.xplane.pb";
  for (const auto& path : {capture, other_host}) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << std::string(600'000, 'x');
  }
  // A snapshot of this host from before, whose description is unreadable: listed by its id, the oldest.
  const std::filesystem::path undescribed = runs / "2026_01_01_00_00_02_slow_step_2";
  std::filesystem::create_directories(undescribed);
  std::ofstream(undescribed / "node0.xplane.pb") << std::string(1'000, 'x');
  std::ofstream(undescribed / "node0.stored_snapshot.txtpb") << "not { a description";
  const std::vector<std::string> flags{
      "--sample_interval_ms", "100",        "--flight_recorder_seconds", "2", "--trigger_cooldown_s", "0",
      "--trigger_warmup_s",   "0",          "--flight_recorder_disk_mb", "1", "--host_name",          "node0",
      "--repository_root",    root.string()};
  constexpr uint64_t kCap = 1 << 20;
  // At least three runs, and until the snapshots written exceed the cap: retention must have had to delete.
  uint64_t written = 0;
  for (int run = 0; run < 3 || written <= kCap; ++run) {
    ASSERT_LT(run, 12) << "12 runs wrote " << written << " bytes of snapshots, not more than the cap";
    const std::set<std::string> left_before = stored_on_disk(runs, "node0");
    AgentProcess agent(flags);
    const podscope::v1::FlightRecorderStatus at_start = agent_status(agent).flight_recorder();
    std::set<std::string> listed;
    for (const auto& s : at_start.snapshots()) {
      listed.insert(s.id());
      EXPECT_TRUE(std::filesystem::exists(s.path())) << s.path();
    }
    EXPECT_EQ(listed, left_before) << "run " << run << ": what earlier runs left on disk is listed at start";
    if (run == 0) {
      EXPECT_EQ(listed, std::set<std::string>{undescribed.filename().string()}) << at_start.DebugString();
    } else {
      EXPECT_GT(listed.size(), 0u) << "run " << run << ": the previous run left snapshots within the cap";
    }
    if (!listed.empty() && run > 0) {
      podscope::v1::RecordedWindowResponse served;
      EXPECT_TRUE(stored_snapshot(agent, *listed.rbegin(), served).ok()) << "served from disk";
      tensorflow::profiler::XSpace space;
      EXPECT_TRUE(space.ParseFromString(served.xspace()));
      EXPECT_GT(space.planes_size(), 0);
    }
    EXPECT_LE(disk_bytes_of(runs, "node0"), kCap) << "run " << run << " at start";
    // ring_trainer's default steps, each waiting at least 4 ms for its batch: a snapshot of 2 s holds at most 500
    // steps per rank (some hundred KiB) on a machine of any speed, so each fits the cap (one that does not is
    // deleted from disk at once and only held in memory); two steps 300 ms longer, each freezing a snapshot
    // (cool-down 0).
    const int64_t first_slow = 200;
    auto ranks = start_ranks(agent.socket_dir() + "/agent.sock", {"--input_delay_ms", "4"},
                             {{"--slow_steps", std::to_string(first_slow) + ":1:300", "--slow_rank", "0"},
                              {"--slow_steps", std::to_string(first_slow + 400) + ":1:300", "--slow_rank", "1"}});
    // Two new snapshots, and the newest on disk before the restart: a loaded host may take seconds to freeze one.
    std::vector<podscope::v1::StoredSnapshot> new_ones;
    ASSERT_TRUE(wait_for(
        [&] {
          new_ones.clear();
          for (const auto& s : snapshots_of(agent)) {
            if (!listed.count(s.id())) new_ones.push_back(s);
          }
          return new_ones.size() >= 2 && !new_ones.back().path().empty() &&
                 std::filesystem::exists(new_ones.back().path());
        },
        120s))
        << agent_status(agent).flight_recorder().DebugString() << agent.output();
    for (const auto& s : new_ones) written += s.bytes();
    ranks.clear();
    agent.signal(SIGTERM);
    ASSERT_TRUE(agent.wait_exit(20s).has_value()) << agent.output();
    EXPECT_LE(disk_bytes_of(runs, "node0"), kCap) << "run " << run << " at its end";
  }
  EXPECT_FALSE(std::filesystem::exists(undescribed)) << "the oldest goes first";
  EXPECT_TRUE(std::filesystem::exists(capture)) << "a capture's run is not a snapshot";
  EXPECT_TRUE(std::filesystem::exists(other_host)) << "another host's snapshot is its own";
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace podscope
