// The tick → Unix ns conversion: spans of one thread that follow each other in ticks follow each other in ns,
// across recalibrations, realtime slews and steps, whenever each span is converted; and the conversion keeps
// up with CLOCK_REALTIME.
#include "client/tick_clock.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace podscope::client {
namespace {

// A simulated machine: true time in ns; a 3 GHz TSC; a realtime clock that runs `realtime_rate` against true
// time (NTP slews it), may be stepped, and is read with a few hundred ns of jitter.
struct SimulatedClocks {
  int64_t true_ns = 1'000'000'000;
  double realtime_rate = 1.0 + 20e-6;
  int64_t realtime_base = 1'790'000'000'000'000'000;
  int64_t realtime_at_base_true = 1'000'000'000;
  std::mt19937_64 jitter{7};

  uint64_t tick() const { return static_cast<uint64_t>(true_ns) * 3; }
  int64_t realtime() const {
    return realtime_base + static_cast<int64_t>(static_cast<double>(true_ns - realtime_at_base_true) * realtime_rate);
  }
  // Changes the realtime rate from now on, continuously (a slew).
  void slew(double rate) {
    realtime_base = realtime();
    realtime_at_base_true = true_ns;
    realtime_rate = rate;
  }
  void step(int64_t ns) { realtime_base += ns; }
};

SimulatedClocks* clocks = nullptr;

TickReading read_simulated() {
  const int64_t noise = static_cast<int64_t>(clocks->jitter() % 600) - 300;
  return TickReading{clocks->tick(), clocks->realtime() + noise};
}

struct Span {
  uint64_t begin_tick, end_tick;
  int64_t begin_ns = 0, end_ns = 0;
};

class TickClockTest : public ::testing::Test {
 protected:
  void SetUp() override { clocks = &sim_; }
  void TearDown() override { clocks = nullptr; }

  // Runs `periods` background-thread rounds of 50 ms: each records back-to-back spans of one thread, then
  // calibrates and converts what was recorded — now and then only every few rounds, as a late drain would.
  void run(TickClock& clock, int periods) {
    std::uniform_int_distribution<int64_t> span_ns(1'000, 2'000'000);
    for (int p = 0; p < periods; ++p) {
      const int64_t period_end = sim_.true_ns + 50'000'000;
      while (sim_.true_ns < period_end) {
        Span s{sim_.tick(), 0};
        sim_.true_ns += span_ns(rng_);
        s.end_tick = sim_.tick();
        pending_.push_back(s);
      }
      clock.calibrate();
      if (p % 7 == 3) continue;  // a late drain: these spans are converted after the next calibration
      for (Span& s : pending_) {
        s.begin_ns = clock.to_unix_ns(s.begin_tick);
        s.end_ns = clock.to_unix_ns(s.end_tick);
        spans_.push_back(s);
      }
      pending_.clear();
    }
  }
  void expect_monotonic() const {
    for (size_t i = 0; i < spans_.size(); ++i) {
      ASSERT_LE(spans_[i].begin_ns, spans_[i].end_ns) << "span " << i;
      if (i > 0) {
        ASSERT_LE(spans_[i - 1].end_ns, spans_[i].begin_ns)
            << "span " << i << " begins before span " << i - 1 << " ends";
      }
    }
  }
  int64_t error_now(const TickClock& clock) const { return clock.to_unix_ns(sim_.tick()) - sim_.realtime(); }

  SimulatedClocks sim_;
  std::mt19937_64 rng_{11};
  std::vector<Span> pending_;
  std::vector<Span> spans_;
};

TEST_F(TickClockTest, SpansThatFollowInTicksFollowInNsAcrossRecalibrationsAndSlews) {
  TickClock clock(read_simulated);
  run(clock, 40);
  sim_.slew(1.0 - 30e-6);  // NTP changes the realtime rate: the long-baseline rate is wrong for a while
  run(clock, 120);
  sim_.step(40'000);  // small steps either way are slewed, not jumped
  run(clock, 40);
  sim_.step(-60'000);
  run(clock, 40);
  expect_monotonic();
  EXPECT_GT(spans_.size(), 1000u);
}

TEST_F(TickClockTest, KeepsUpWithRealtimeBySlewing) {
  TickClock clock(read_simulated);
  run(clock, 100);
  EXPECT_LT(std::abs(error_now(clock)), 5'000);
  sim_.step(50'000);
  run(clock, 100);  // 5 s: the 50 µs closes at a bounded rate
  EXPECT_LT(std::abs(error_now(clock)), 5'000);
  sim_.slew(1.0 + 50e-6);
  run(clock, 200);
  EXPECT_LT(std::abs(error_now(clock)), 5'000);
  expect_monotonic();
}

TEST_F(TickClockTest, ALargeRealtimeStepIsFollowedAtOnce) {
  TickClock clock(read_simulated);
  run(clock, 20);
  sim_.step(3'000'000'000);  // the clock set by hand
  run(clock, 1);
  EXPECT_LT(std::abs(error_now(clock)), 5'000);
}

TEST_F(TickClockTest, ATickConvertsTheSameBeforeAndAfterACalibration) {
  TickClock clock(read_simulated);
  run(clock, 5);
  const uint64_t tick = sim_.tick();
  const int64_t before = clock.to_unix_ns(tick);
  sim_.true_ns += 50'000'000;
  sim_.step(20'000);
  clock.calibrate();
  EXPECT_EQ(clock.to_unix_ns(tick), before);
}

}  // namespace
}  // namespace podscope::client
