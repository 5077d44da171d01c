// The sweep that splits a core's time: priority between overlapping ops, idle, clipping at step edges.
#include "analysis/steps/step_breakdown.h"

#include <gtest/gtest.h>

#include <numeric>

namespace podscope::analysis {
namespace {

int64_t total(const StepBreakdown& b) { return std::accumulate(b.op_ns.begin(), b.op_ns.end(), b.idle_ns); }
int64_t of(const StepBreakdown& b, OpKind k) { return b.op_ns[static_cast<int>(k)]; }

TEST(StepBreakdownTest, HigherPriorityKindTakesOverlappedTimeAndRestIsIdle) {
  // Step [0, 100): compute [0, 60), an all-reduce [50, 80) with a send [55, 90) inside and after it.
  std::vector<OpInterval> ops = {
      {0, 60, OpKind::kHighFlopsCompute}, {50, 80, OpKind::kCollective}, {55, 90, OpKind::kSend}};
  const auto result = break_down_steps(ops, {{1, 0, 100}});
  ASSERT_EQ(result.size(), 1u);
  EXPECT_EQ(of(result[0], OpKind::kHighFlopsCompute), 50);
  EXPECT_EQ(of(result[0], OpKind::kCollective), 30);
  EXPECT_EQ(of(result[0], OpKind::kSend), 10);
  EXPECT_EQ(result[0].idle_ns, 10);
  EXPECT_EQ(total(result[0]), 100);
}

TEST(StepBreakdownTest, OpsSpanningStepEdgesAreClippedToEachStep) {
  std::vector<OpInterval> ops = {{-50, 30, OpKind::kInfeed}, {90, 130, OpKind::kLowFlopsCompute}};
  const auto result = break_down_steps(ops, {{1, 0, 100}, {2, 110, 200}});
  ASSERT_EQ(result.size(), 2u);
  EXPECT_EQ(of(result[0], OpKind::kInfeed), 30);
  EXPECT_EQ(of(result[0], OpKind::kLowFlopsCompute), 10);
  EXPECT_EQ(result[0].idle_ns, 60);
  EXPECT_EQ(of(result[1], OpKind::kLowFlopsCompute), 20);
  EXPECT_EQ(result[1].idle_ns, 70);
  EXPECT_EQ(total(result[0]), 100);
  EXPECT_EQ(total(result[1]), 90);
}

TEST(StepBreakdownTest, SameKindOverlapIsCountedOnce) {
  std::vector<OpInterval> ops = {
      {0, 50, OpKind::kLowFlopsCompute}, {10, 40, OpKind::kLowFlopsCompute}, {40, 50, OpKind::kLowFlopsCompute}};
  const auto result = break_down_steps(ops, {{0, 0, 60}});
  EXPECT_EQ(of(result[0], OpKind::kLowFlopsCompute), 50);
  EXPECT_EQ(result[0].idle_ns, 10);
}

TEST(StepBreakdownTest, NoStepsGiveNoBreakdown) {
  std::vector<OpInterval> ops = {{0, 50, OpKind::kLowFlopsCompute}};
  EXPECT_TRUE(break_down_steps(ops, {}).empty());
}

}  // namespace
}  // namespace podscope::analysis
