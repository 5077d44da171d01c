// Triggered snapshots from synthetic steps into a real flight recorder: a slow step freezes a snapshot that is
// listed, served by id, described (pid, program, step, median) and reported; every slow step is counted by what
// became of it (a snapshot, one within the cool-down, warming up, below the bar, freezer busy, too late, recorder
// off); the newest flight_recorder_max_snapshots are kept in memory; snapshots are written as TensorBoard runs,
// served from disk once out of memory, and found again by the next agent, which keeps this host's snapshots within
// the disk cap, oldest deleted first, leaving captures and other hosts' files alone.
#include "agent/recorder/triggered_snapshots.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tensorflow/xplane.pb.h"
#include "tests/agent/recorder/recorder_parts.h"
#include "tests/eventually.h"
#include "tests/scratch_directory.h"

namespace podscope::agent {
namespace {

using podscope::testing::eventually;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using testing::RecorderParts;

constexpr int64_t kMs = 1'000'000;
constexpr int32_t kPid = 4242;
constexpr int kBudget = static_cast<int>(SlowStepDetector::kBudget);

// Judged from the 20th step on, with no warm-up in time, a snapshot frozen as soon as its slow step has ended.
TriggeredSnapshotSettings judged_at_once() {
  TriggeredSnapshotSettings s;
  s.slow_step.min_steps = 20;
  s.slow_step.warmup_ns = 0;
  s.settle_ms = 0;
  return s;
}

// One process's steps on the agent's clock, in the recent past: 10 ms steps and, now and then, a slow one.
class Steps {
 public:
  Steps(TriggeredSnapshots& snapshots, const Clock& clock, int64_t ago_ms = 5'000)
      : snapshots_(snapshots), end_ns_(clock.now_ns() - ago_ms * kMs) {}
  void regular(int count) {
    for (int i = 0; i < count; ++i) step(10);
  }
  int64_t slow(int64_t ms = 100) {
    step(ms);
    return num_ - 1;
  }

 private:
  void step(int64_t ms) {
    end_ns_ += ms * kMs;
    snapshots_.observe_step(kPid, StepRecord{0, num_++, end_ns_ - ms * kMs, end_ns_});
  }
  TriggeredSnapshots& snapshots_;
  int64_t end_ns_;
  int64_t num_ = 0;
};

std::string outcome(const char* name, int count) {
  return "podscope_slow_steps_total{host=\"h\",outcome=\"" + std::string(name) + "\"} " + std::to_string(count) + "\n";
}

class TriggeredSnapshotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const uint64_t connection = parts_.clients->add_connection(
        kPid, ::getuid(), [](std::string) {}, [] {});
    parts_.clients->on_register(connection, {local::kProtocolVersion, kPid, "trainer", "job", {0}});
  }
  std::unique_ptr<TriggeredSnapshots> make(TriggeredSnapshotSettings settings) {
    return std::make_unique<TriggeredSnapshots>(parts_.recorder, parts_.clients, parts_.clock, parts_.host_name,
                                                std::move(settings), parts_.metrics);
  }
  void record() { ASSERT_TRUE(parts_.recorder.start(FlightRecorderSettings{30'000 * kMs, size_t{8} << 20}).ok()); }

  RecorderParts parts_;
};

TEST_F(TriggeredSnapshotsTest, ASlowStepFreezesASnapshotListedServedByIdAndReported) {
  record();
  auto snapshots = make(judged_at_once());
  std::vector<std::pair<podscope::v1::StoredSnapshot, int64_t>> reported;
  snapshots->set_reporter(
      [&reported](const podscope::v1::StoredSnapshot& s, int64_t window_ns) { reported.emplace_back(s, window_ns); });
  ASSERT_TRUE(snapshots->start().ok());
  Steps steps(*snapshots, parts_.clock);
  steps.regular(30);
  const int64_t slow = steps.slow(100);
  ASSERT_TRUE(eventually([&] { return snapshots->triggered() == 1; }));
  snapshots->stop();  // the reporter has run by the time the freezing thread is joined

  const std::vector<podscope::v1::StoredSnapshot> held = snapshots->list();
  ASSERT_EQ(held.size(), 1u);
  const podscope::v1::StoredSnapshot& s = held[0];
  EXPECT_THAT(s.id(), EndsWith("_slow_step_1"));
  EXPECT_EQ(s.reason(), "slow_step");
  EXPECT_EQ(s.pid(), kPid);
  EXPECT_EQ(s.program(), "trainer") << "named by the client registry";
  EXPECT_EQ(s.step_num(), slow);
  EXPECT_EQ(s.step_ns(), 100 * kMs);
  EXPECT_EQ(s.median_ns(), 10 * kMs);
  EXPECT_EQ(s.end_ns(), s.step_end_ns()) << "no settle time: the span ends with the slow step";
  // The span reaches back the recorder's 30 s window, from the moment it was frozen (the slow step ended 4.5 s ago).
  EXPECT_LT(s.end_ns() - s.start_ns(), 30'000 * kMs);
  EXPECT_GT(s.end_ns() - s.start_ns(), 15'000 * kMs);
  EXPECT_TRUE(s.path().empty()) << "no runs directory: nothing written";

  const auto served = snapshots->get(s.id());
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->xspace.size(), s.bytes());
  tensorflow::profiler::XSpace space;
  EXPECT_TRUE(space.ParseFromString(served->xspace));
  const auto unknown = snapshots->get("no_such_snapshot");
  EXPECT_TRUE(absl::IsNotFound(unknown.status()));
  EXPECT_THAT(unknown.status().message(), HasSubstr("no_such_snapshot"));

  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].first.id(), s.id());
  EXPECT_EQ(reported[0].second, 30'000 * kMs);
  const std::string text = parts_.metrics_text();
  EXPECT_THAT(text, HasSubstr(outcome("snapshot", 1)));
  EXPECT_THAT(text, HasSubstr("podscope_triggered_snapshots_total{host=\"h\",reason=\"slow_step\"} 1\n"));
}

TEST_F(TriggeredSnapshotsTest, TheBudgetSpentSlowStepsAreCountedWithinTheCooldownThenBelowTheBar) {
  record();
  auto snapshots = make(judged_at_once());
  ASSERT_TRUE(snapshots->start().ok());
  Steps steps(*snapshots, parts_.clock);
  steps.regular(30);
  for (int i = 0; i < kBudget; ++i) {
    steps.slow(100);
    steps.regular(5);
  }
  steps.slow(100);  // as slow as those the budget went to
  EXPECT_THAT(parts_.metrics_text(), HasSubstr(outcome("below_bar", 1))) << "counted as it is seen";
  ASSERT_TRUE(eventually([&] { return snapshots->triggered() == static_cast<uint64_t>(kBudget); }));
  const std::string text = parts_.metrics_text();
  EXPECT_THAT(text, HasSubstr(outcome("snapshot", 1)));
  EXPECT_THAT(text, HasSubstr(outcome("within_cooldown", kBudget - 1)));
  EXPECT_EQ(snapshots->list().size(), static_cast<size_t>(kBudget));
}

TEST_F(TriggeredSnapshotsTest, SlowStepsWhileAProcessWarmsUpAreCountedNotSnapshot) {
  record();
  TriggeredSnapshotSettings settings = judged_at_once();
  settings.slow_step.warmup_ns = 60'000 * kMs;
  auto snapshots = make(settings);
  ASSERT_TRUE(snapshots->start().ok());
  Steps steps(*snapshots, parts_.clock);
  steps.regular(30);
  steps.slow(100);
  EXPECT_THAT(parts_.metrics_text(), HasSubstr(outcome("warming_up", 1)));
  snapshots->stop();
  EXPECT_EQ(snapshots->triggered(), 0u);
}

TEST_F(TriggeredSnapshotsTest, OnlyTheNewestMaxSnapshotsAreKept) {
  record();
  TriggeredSnapshotSettings settings = judged_at_once();
  settings.max_snapshots = 2;
  settings.slow_step.cooldown_ns = 0;  // every slow step freezes one
  auto snapshots = make(settings);
  ASSERT_TRUE(snapshots->start().ok());
  Steps steps(*snapshots, parts_.clock);
  steps.regular(30);
  for (int i = 0; i < 3; ++i) {
    steps.slow(100);
    steps.regular(5);
    ASSERT_TRUE(eventually([&] { return snapshots->triggered() == static_cast<uint64_t>(i + 1); }));
  }
  const std::vector<podscope::v1::StoredSnapshot> held = snapshots->list();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_THAT(held[0].id(), EndsWith("_slow_step_2"));
  EXPECT_THAT(held[1].id(), EndsWith("_slow_step_3"));
  EXPECT_EQ(snapshots->deleted(), 1u);
  EXPECT_THAT(parts_.metrics_text(),
              HasSubstr("podscope_flight_recorder_snapshots_deleted_total{host=\"h\",where=\"memory\"} 1\n"));
}

TEST_F(TriggeredSnapshotsTest, TriggersPastThePendingBoundAreDroppedAndCounted) {
  record();
  TriggeredSnapshotSettings settings = judged_at_once();
  settings.slow_step.cooldown_ns = 0;
  settings.settle_ms = 600'000;  // the freezer waits for the first trigger's span to end
  auto snapshots = make(settings);
  ASSERT_TRUE(snapshots->start().ok());
  Steps steps(*snapshots, parts_.clock);
  steps.regular(30);
  for (size_t i = 0; i < TriggeredSnapshots::kMaxPending + 2; ++i) {
    steps.slow(100);
    steps.regular(5);
  }
  EXPECT_THAT(parts_.metrics_text(), HasSubstr(outcome("freezer_busy", 2)));
  snapshots->stop();  // promptly, though the first trigger's span has not ended
  EXPECT_EQ(snapshots->triggered(), 0u);
}

TEST_F(TriggeredSnapshotsTest, ASlowStepThatLeftTheWindowBeforeItsTurnIsTooLate) {
  ASSERT_TRUE(parts_.recorder.start(FlightRecorderSettings{1'000 * kMs, size_t{8} << 20}).ok());
  auto snapshots = make(judged_at_once());
  ASSERT_TRUE(snapshots->start().ok());
  Steps steps(*snapshots, parts_.clock, 5'000);  // the steps ended seconds ago; the window is 1 s
  steps.regular(30);
  steps.slow(100);
  EXPECT_TRUE(eventually([&] { return parts_.metrics_text().find(outcome("too_late", 1)) != std::string::npos; }));
  EXPECT_EQ(snapshots->triggered(), 0u);
}

TEST_F(TriggeredSnapshotsTest, WithTheRecorderOffASlowStepIsCounted) {
  auto snapshots = make(judged_at_once());
  ASSERT_TRUE(snapshots->start().ok());
  Steps steps(*snapshots, parts_.clock);
  steps.regular(30);
  steps.slow(100);
  EXPECT_TRUE(eventually([&] { return parts_.metrics_text().find(outcome("recorder_off", 1)) != std::string::npos; }));
  EXPECT_TRUE(snapshots->list().empty());
}

class StoredSnapshotsTest : public TriggeredSnapshotsTest {
 protected:
  TriggeredSnapshotSettings on_disk() {
    TriggeredSnapshotSettings s = judged_at_once();
    s.runs_directory = runs_;
    return s;
  }
  // A run directory under the runs directory with `file` of `bytes` bytes in it.
  void plant(const std::string& run, const std::string& file, size_t bytes) {
    std::filesystem::create_directories(runs_ / run);
    std::ofstream(runs_ / run / file) << std::string(bytes, 'x');
  }

  const podscope::testing::ScratchDirectory root_{"stored_snapshots"};
  const std::filesystem::path runs_ = root_.path() / "plugins" / "profile";
};

TEST_F(StoredSnapshotsTest, WrittenAsTensorBoardRunsServedFromDiskAndFoundAgainByTheNextAgent) {
  record();
  TriggeredSnapshotSettings settings = on_disk();
  settings.max_memory_bytes = 1;  // no snapshot stays in memory: each is served from disk
  std::string id, xspace;
  {
    auto snapshots = make(settings);
    ASSERT_TRUE(snapshots->start().ok());
    Steps steps(*snapshots, parts_.clock);
    steps.regular(30);
    steps.slow(100);
    ASSERT_TRUE(eventually([&] { return snapshots->triggered() == 1; }));
    const std::vector<podscope::v1::StoredSnapshot> held = snapshots->list();
    ASSERT_EQ(held.size(), 1u);
    id = held[0].id();
    EXPECT_EQ(held[0].path(), (runs_ / id / "h.xplane.pb").string());
    EXPECT_TRUE(std::filesystem::is_regular_file(runs_ / id / "h.stored_snapshot.txtpb"));
    const auto served = snapshots->get(id);
    ASSERT_TRUE(served.ok()) << served.status();
    xspace = served->xspace;
    EXPECT_EQ(xspace.size(), held[0].bytes());
    EXPECT_EQ(std::filesystem::file_size(held[0].path()), xspace.size());
  }
  auto next = make(on_disk());
  ASSERT_TRUE(next->start().ok());
  const std::vector<podscope::v1::StoredSnapshot> found = next->list();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].id(), id);
  EXPECT_EQ(found[0].pid(), kPid) << "its description was written beside it";
  EXPECT_EQ(found[0].step_ns(), 100 * kMs);
  const auto served = next->get(id);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->xspace, xspace);
}

TEST_F(StoredSnapshotsTest, TheNextAgentKeepsThisHostsSnapshotsWithinTheDiskCapAndLeavesTheRestAlone) {
  plant("2026_01_01_00_00_01_slow_step_1", "h.xplane.pb", 1000);
  plant("2026_01_01_00_00_01_slow_step_1", "other.xplane.pb", 1000);  // another host's, in the same run
  plant("2026_01_01_00_00_02_slow_step_2", "h.xplane.pb", 1000);
  plant("2026_01_01_00_00_02_slow_step_2", "h.stored_snapshot.txtpb", 5);  // not a description: kept by its id
  plant("2026_01_01_00_00_03_slow_step_7", "h.xplane.pb", 1000);
  plant("2026_01_01_00_00_00", "h.xplane.pb", 5000);  // a capture's run
  record();
  TriggeredSnapshotSettings settings = on_disk();
  settings.max_disk_bytes = 1500;
  settings.slow_step.cooldown_ns = 0;
  auto snapshots = make(settings);
  ASSERT_TRUE(snapshots->start().ok());

  std::vector<podscope::v1::StoredSnapshot> held = snapshots->list();
  ASSERT_EQ(held.size(), 1u) << "the oldest deleted first";
  EXPECT_EQ(held[0].id(), "2026_01_01_00_00_03_slow_step_7");
  EXPECT_EQ(snapshots->deleted(), 2u);
  EXPECT_THAT(parts_.metrics_text(),
              HasSubstr("podscope_flight_recorder_snapshots_deleted_total{host=\"h\",where=\"disk\"} 2\n"));
  EXPECT_FALSE(std::filesystem::exists(runs_ / "2026_01_01_00_00_01_slow_step_1" / "h.xplane.pb"));
  EXPECT_TRUE(std::filesystem::exists(runs_ / "2026_01_01_00_00_01_slow_step_1" / "other.xplane.pb"));
  EXPECT_FALSE(std::filesystem::exists(runs_ / "2026_01_01_00_00_02_slow_step_2"));
  EXPECT_TRUE(std::filesystem::exists(runs_ / "2026_01_01_00_00_00" / "h.xplane.pb"));

  // The next snapshot's id follows the sequence of those found.
  Steps steps(*snapshots, parts_.clock);
  steps.regular(30);
  steps.slow(100);
  ASSERT_TRUE(eventually([&] { return snapshots->triggered() == 1; }));
  held = snapshots->list();
  ASSERT_FALSE(held.empty());
  EXPECT_THAT(held.back().id(), EndsWith("_slow_step_8"));
}

}  // namespace
}  // namespace podscope::agent
