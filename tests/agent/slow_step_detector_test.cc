// SlowStepDetector: a step longer than factor × its process's rolling median triggers once enough steps were
// seen, per process, at most once per cool-down for the whole agent.
#include "agent/steps/slow_step_detector.h"

#include <gtest/gtest.h>

namespace podscope::agent {
namespace {

constexpr int64_t kMs = 1'000'000;

// A step of `ms` ending at `end_ms`.
StepRecord step(int64_t num, int64_t end_ms, int64_t ms) {
  return StepRecord{0, num, (end_ms - ms) * kMs, end_ms * kMs};
}

TEST(SlowStepDetector, AStepPastTheFactorTimesTheMedianTriggersOnlyAfterMinSteps) {
  SlowStepDetector detector(SlowStepSettings{2.0, 20, 0});
  int64_t t = 0;
  for (int64_t i = 0; i < 5; ++i) EXPECT_FALSE(detector.observe(7, step(i, t += 10, 10)));
  EXPECT_FALSE(detector.observe(7, step(5, t += 50, 50))) << "only 5 steps seen";
  for (int64_t i = 6; i < 25; ++i) EXPECT_FALSE(detector.observe(7, step(i, t += 10, 10)));
  EXPECT_FALSE(detector.observe(7, step(25, t += 19, 19))) << "1.9x the median";
  const std::optional<SlowStep> slow = detector.observe(7, step(26, t += 21, 21));
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->pid, 7);
  EXPECT_EQ(slow->step.step_num, 26);
  EXPECT_EQ(slow->step_ns, 21 * kMs);
  EXPECT_EQ(slow->median_ns, 10 * kMs);
}

TEST(SlowStepDetector, EachProcessIsComparedWithItsOwnMedian) {
  SlowStepDetector detector(SlowStepSettings{2.0, 20, 0});
  int64_t t = 0;
  for (int64_t i = 0; i < 30; ++i) {
    detector.observe(1, step(i, t += 10, 10));
    detector.observe(2, step(i, t, 100));
  }
  EXPECT_FALSE(detector.observe(2, step(30, t += 150, 150))) << "1.5x its own median";
  EXPECT_TRUE(detector.observe(1, step(30, t, 150)));
}

TEST(SlowStepDetector, NoSecondTriggerWithinTheCooldownFromAnyProcess) {
  SlowStepDetector detector(SlowStepSettings{2.0, 20, 1000 * kMs});
  int64_t t = 0;
  for (int64_t i = 0; i < 30; ++i) {
    detector.observe(1, step(i, t += 10, 10));
    detector.observe(2, step(i, t, 10));
  }
  EXPECT_TRUE(detector.observe(1, step(30, t += 100, 100)));
  EXPECT_FALSE(detector.observe(2, step(30, t, 100))) << "the same slow step seen by another process";
  EXPECT_FALSE(detector.observe(1, step(31, t += 900, 100)));
  EXPECT_TRUE(detector.observe(2, step(31, t += 200, 100))) << "past the cool-down";
}

TEST(SlowStepDetector, EmptyOrBackwardStepsAreIgnored) {
  SlowStepDetector detector(SlowStepSettings{2.0, 3, 0});
  for (int64_t i = 0; i < 5; ++i) detector.observe(1, step(i, 10 * (i + 1), 10));
  EXPECT_FALSE(detector.observe(1, StepRecord{0, 5, 100 * kMs, 100 * kMs}));
  EXPECT_FALSE(detector.observe(1, StepRecord{0, 6, 200 * kMs, 100 * kMs}));
  EXPECT_TRUE(detector.observe(1, step(7, 300, 50)));
}

TEST(SlowStepDetector, TheMedianFollowsTheLastHistorySteps) {
  SlowStepSettings settings{2.0, 5, 0};
  settings.history = 11;
  SlowStepDetector detector(settings);
  int64_t t = 0;
  for (int64_t i = 0; i < 11; ++i) detector.observe(1, step(i, t += 100, 100));
  // Eleven 30 ms steps push every 100 ms step out of the window: 65 ms is now past 2 × the median.
  for (int64_t i = 11; i < 22; ++i) EXPECT_FALSE(detector.observe(1, step(i, t += 30, 30)));
  const std::optional<SlowStep> slow = detector.observe(1, step(22, t += 65, 65));
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->median_ns, 30 * kMs);
}

TEST(SlowStepDetector, ProcessesPastTheCapForgetTheOneSilentLongest) {
  SlowStepSettings settings{2.0, 3, 0};
  settings.max_processes = 2;
  SlowStepDetector detector(settings);
  for (int64_t i = 0; i < 5; ++i) {
    detector.observe(1, step(i, 10 * (i + 1), 10));
    detector.observe(2, step(i, 10 * (i + 1) + 1, 10));
  }
  detector.observe(3, step(0, 100, 10));
  EXPECT_EQ(detector.processes(), 2u);
  EXPECT_EQ(detector.processes_forgotten(), 1u);
  EXPECT_TRUE(detector.observe(2, step(5, 200, 50))) << "process 2 kept its history";
  EXPECT_FALSE(detector.observe(1, step(5, 300, 50))) << "process 1 was forgotten: it starts over";
}

}  // namespace
}  // namespace podscope::agent
