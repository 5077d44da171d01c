#include "pod_capture/clock_sync.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "pod_capture/agent_connection.h"

namespace podscope::pod_capture {
namespace {

// An exchange with a true offset, one-way delays and agent processing time.
PingExchange exchange(int64_t t0, int64_t offset, int64_t up, int64_t processing, int64_t down) {
  PingExchange e;
  e.t0_ns = t0;
  e.t1_ns = t0 + up + offset;
  e.t2_ns = e.t1_ns + processing;
  e.t3_ns = t0 + up + processing + down;
  return e;
}

TEST(ClockSync, SymmetricPathGivesExactOffsetAndRtt) {
  const auto e = exchange(1'000'000, 5'000'000, 40'000, 10'000, 40'000);
  EXPECT_EQ(e.offset_ns(), 5'000'000);
  EXPECT_EQ(e.rtt_ns(), 80'000);
}

TEST(ClockSync, KeepsMinimumRttSamplesAndIgnoresDelayedOnes) {
  std::vector<PingExchange> burst;
  // Most exchanges are delayed on the way up by queueing (which biases the naive offset by +delay/2).
  for (int i = 0; i < 10; ++i) burst.push_back(exchange(i * 1'000'000, -3'000'000, 40'000 + 500'000, 5'000, 40'000));
  burst.push_back(exchange(20'000'000, -3'000'000, 40'000, 5'000, 40'000));
  burst.push_back(exchange(21'000'000, -3'000'000, 41'000, 5'000, 40'000));
  auto estimate = estimate_offset(burst);
  ASSERT_TRUE(estimate.ok()) << estimate.status();
  EXPECT_NEAR(estimate->offset_ns, -3'000'000, 1'000);
  EXPECT_EQ(estimate->rtt_ns, 80'000);
  EXPECT_EQ(estimate->error_bound_ns, 40'500) << "half the largest kept RTT: the median is one of the kept";
  EXPECT_EQ(estimate->samples, 2);
}

TEST(ClockSync, PingsThatWaitedBehindOthersAreDiscardedWhicheverSideTheyWaitedOn) {
  // A burst sharing a window of pings in flight on a busy client: most answers waited 50–400 µs to be read (t3
  // late: each offset biased down by half the wait), some requests waited to be sent (t0 early: biased up); three
  // exchanges waited for nothing.
  constexpr int64_t kOffset = -12'345'678;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> wait(50'000, 400'000);
  std::vector<PingExchange> burst;
  for (int i = 0; i < 60; ++i) {
    const int64_t queued = wait(rng);
    const int64_t t0 = i * 1'000'000;
    burst.push_back(i % 4 == 0 ? exchange(t0, kOffset, 30'000 + queued, 5'000, 30'000)
                               : exchange(t0, kOffset, 30'000, 5'000, 30'000 + queued));
  }
  burst.push_back(exchange(70'000'000, kOffset, 30'000, 5'000, 30'000));
  burst.push_back(exchange(71'000'000, kOffset, 31'000, 5'000, 30'000));
  burst.push_back(exchange(72'000'000, kOffset, 30'000, 5'000, 32'000));

  std::vector<int64_t> all;
  for (const auto& e : burst) all.push_back(e.offset_ns());
  std::nth_element(all.begin(), all.begin() + all.size() / 2, all.end());
  EXPECT_GT(std::abs(all[all.size() / 2] - kOffset), 20'000) << "every exchange's median is biased by the waits";

  auto estimate = estimate_offset(burst);
  ASSERT_TRUE(estimate.ok()) << estimate.status();
  EXPECT_EQ(estimate->samples, 3);
  EXPECT_LE(std::abs(estimate->offset_ns - kOffset), 1'000);
  EXPECT_EQ(estimate->rtt_ns, 60'000);
  EXPECT_EQ(estimate->error_bound_ns, 31'000);
}

TEST(ClockSync, TheErrorNeverExceedsTheBoundWhateverThePathsDo) {
  // Random bursts: one-way delays, waits on either side and agent processing all drawn independently.
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> one_way(1'000, 200'000), waited(0, 2'000'000), processing(0, 50'000),
      offset(-1'000'000'000, 1'000'000'000);
  std::bernoulli_distribution delayed(0.7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t truth = offset(rng);
    std::vector<PingExchange> burst;
    for (int i = 0; i < 1 + trial % 16; ++i) {
      burst.push_back(exchange(i * 3'000'000, truth, one_way(rng) + (delayed(rng) ? waited(rng) : 0), processing(rng),
                               one_way(rng) + (delayed(rng) ? waited(rng) : 0)));
    }
    auto estimate = estimate_offset(burst);
    ASSERT_TRUE(estimate.ok()) << estimate.status();
    ASSERT_LE(std::abs(estimate->offset_ns - truth), estimate->error_bound_ns) << "trial " << trial;
  }
}

TEST(ClockSync, AsymmetricPathErrorStaysWithinHalfRtt) {
  // 1 ms up, 0 down: the estimate is off by 0.5 ms, exactly the documented bound RTT/2.
  auto estimate = estimate_offset({exchange(0, 20'000'000, 1'000'000, 0, 0)});
  ASSERT_TRUE(estimate.ok());
  EXPECT_EQ(estimate->offset_ns - 20'000'000, 500'000);
  EXPECT_LE(std::abs(estimate->offset_ns - 20'000'000), estimate->error_bound_ns);
}

TEST(ClockSync, ABurstSettlesOnceEnoughExchangesAreNearItsSmallestRtt) {
  std::vector<PingExchange> burst;
  burst.push_back(exchange(0, 1'000'000, 30'000, 5'000, 30'000));           // RTT 60 µs
  burst.push_back(exchange(1'000'000, 1'000'000, 300'000, 5'000, 30'000));  // queued on the way up
  burst.push_back(exchange(2'000'000, 1'000'000, 35'000, 5'000, 35'000));   // 70 µs: within 20 µs
  burst.push_back(exchange(3'000'000, 1'000'000, 30'000, 5'000, 400'000));  // queued on the way back
  EXPECT_FALSE(burst_settled(burst, 4)) << "two of four near the smallest RTT";
  burst.push_back(exchange(4'000'000, 1'000'000, 31'000, 5'000, 31'000));
  EXPECT_FALSE(burst_settled(burst, 4));
  burst.push_back(exchange(5'000'000, 1'000'000, 29'000, 5'000, 32'000));
  EXPECT_TRUE(burst_settled(burst, 4));
  // A smaller RTT found later moves the cutoff: the earlier exchanges no longer count as near it.
  burst.push_back(exchange(6'000'000, 1'000'000, 5'000, 5'000, 5'000));  // RTT 10 µs: cutoff 30 µs
  EXPECT_FALSE(burst_settled(burst, 4));
}

ClockMeasurement measured(std::vector<PingExchange> burst) {
  ClockMeasurement m;
  m.kind = ClockMeasurement::kMeasured;
  m.estimate = *estimate_offset(burst);
  m.exchanges = std::move(burst);
  return m;
}

TEST(ClockSync, CombinedBurstsKeepTheCleanerOne) {
  // Opening burst on a loaded host: every exchange queued 200 µs on the way up (offset biased by +100 µs).
  std::vector<PingExchange> loaded, clean;
  for (int i = 0; i < 16; ++i) loaded.push_back(exchange(i * 1'000'000, 7'000'000, 20'000 + 200'000, 5'000, 20'000));
  for (int i = 0; i < 16; ++i) clean.push_back(exchange(90'000'000 + i * 1'000'000, 7'000'000, 20'000, 5'000, 20'000));
  const ClockMeasurement before = measured(loaded), after = measured(clean);
  EXPECT_EQ(before.estimate.offset_ns, 7'100'000);

  const ClockMeasurement both = combine_clocks(before, after);
  EXPECT_EQ(both.kind, ClockMeasurement::kMeasured);
  EXPECT_EQ(both.estimate.offset_ns, 7'000'000);
  EXPECT_EQ(both.estimate.rtt_ns, 40'000);
  EXPECT_EQ(both.exchanges.size(), 32u);
  EXPECT_EQ(combine_clocks(after, before).estimate.offset_ns, 7'000'000);

  // A burst that failed leaves the other one's estimate.
  ClockMeasurement unreachable;
  unreachable.detail = "host:1: ping failed";
  EXPECT_EQ(combine_clocks(before, unreachable).estimate.offset_ns, 7'100'000);
  EXPECT_EQ(combine_clocks(unreachable, after).estimate.offset_ns, 7'000'000);
  EXPECT_EQ(combine_clocks(unreachable, unreachable).kind, ClockMeasurement::kUnreachable);
}

TEST(ClockSync, RejectsAnEmptyOrInconsistentBurst) {
  EXPECT_FALSE(estimate_offset({}).ok());
  PingExchange backwards{100, 50, 40, 90};  // t2 < t1
  auto estimate = estimate_offset({backwards});
  ASSERT_FALSE(estimate.ok());
  EXPECT_NE(std::string(estimate.status().message()).find("no valid ping exchange"), std::string::npos);
}

TEST(BurstPlan, HoldsWhatTheClientSendsInHalfARoundTrip) {
  // Agents on the client's own CPUs: the round trip is hardly longer than the client's own work per ping.
  EXPECT_EQ(ping_window_size(50'000, 40'000, 16), 1);
  // A fleet 300 µs away, a client spending 20 µs per ping: 7 fit in half a round trip.
  EXPECT_EQ(ping_window_size(300'000, 20'000, 16), 7);
  // Far agents are still bounded.
  EXPECT_EQ(ping_window_size(10'000'000, 20'000, 16), 16);
  // Nothing observed yet, or a bound below one: one at a time.
  EXPECT_EQ(ping_window_size(0, 20'000, 16), 1);
  EXPECT_EQ(ping_window_size(300'000, 0, 16), 1);
  EXPECT_EQ(ping_window_size(300'000, 20'000, 0), 1);
}

TEST(BurstPace, IsBehindWhenItsPaceWouldEndItAfterItsDeadline) {
  // 100 of 1000 agents done in 100 ms: 900 more take 900 ms.
  EXPECT_FALSE(burst_behind(0, 100'000'000, 100, 1000, 1'000'000'000));
  EXPECT_TRUE(burst_behind(0, 100'000'000, 100, 1000, 999'000'000));
  // Every agent done: never behind while the deadline is ahead.
  EXPECT_FALSE(burst_behind(0, 500'000'000, 1000, 1000, 600'000'000));
  // None done yet: behind only once the deadline has passed.
  EXPECT_FALSE(burst_behind(0, 10'000'000, 0, 1000, 20'000'000));
  EXPECT_TRUE(burst_behind(0, 20'000'000, 0, 1000, 20'000'000));
}

TEST(DriftEstimator, NeedsALongSeriesThenFindsTheSlope) {
  DriftEstimator drift;
  // 10 ppm: 10 µs of offset per second.
  for (int s = 0; s < 5; ++s) drift.add({.offset_ns = s * 10'000, .measured_at_ns = s * 1'000'000'000LL});
  EXPECT_EQ(drift.drift_ppm(), 0.0) << "5 s is too short a series";
  for (int s = 5; s <= 120; ++s) drift.add({.offset_ns = s * 10'000, .measured_at_ns = s * 1'000'000'000LL});
  EXPECT_NEAR(drift.drift_ppm(), 10.0, 0.01);
}

}  // namespace
}  // namespace podscope::pod_capture
