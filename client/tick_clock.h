// Converts the annotation hot path's cheap ticks (TSC) into Unix ns. Only the background thread uses it.
//
// The conversion is one continuous, non-decreasing function of the tick, so that the times of one thread never
// run backwards: a span that ends before the next one begins (in ticks) ends before it in ns too, whichever
// calibration each was converted under. The function is piecewise linear: every calibrate() starts a new segment
// where the previous one is at that tick, with the rate measured over the last seconds, corrected so that
// the distance to CLOCK_REALTIME closes over kSlewNs (as NTP slews). Recent segments are kept, so a tick read
// before a calibration converts exactly as it did before it. Only a realtime step larger than kStepNs (a clock
// set by hand, not drift) is followed at once, as the system clock itself jumps.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <ctime>
#include <deque>

#include "client/podscope.h"

namespace podscope::client {

// A tick and the CLOCK_REALTIME instant it was read at.
struct TickReading {
  uint64_t tick = 0;
  int64_t unix_ns = 0;
};

class TickClock {
 public:
  using Reader = TickReading (*)();

  // The system reader pairs the tick with the midpoint of two realtime reads; tests pass their own.
  explicit TickClock(Reader read = read_system) : read_(read) {
    const TickReading first = read_();
    baseline_.push_back(first);
    segments_.push_back(Segment{first.tick, first.unix_ns, 0});
  }

  // Call periodically (every few ms to s): refines the rate and starts a new segment.
  void calibrate() {
    const TickReading now = read_();
    if (now.tick <= segments_.back().tick) return;
    // Drift moves the distance to realtime by a few µs between calibrations at most; a larger jump is realtime
    // being stepped, which would spoil a rate measured across it: measure anew from here.
    const int64_t error_before = calibrated() ? now.unix_ns - to_unix_ns(now.tick) : 0;
    if (std::abs(error_before - last_error_) > kStepDetectNs) baseline_.clear();
    measure_rate(now);
    if (ns_per_tick_ == 0) return;
    if (segments_.back().ns_per_tick == 0) segments_.back().ns_per_tick = ns_per_tick_;  // the first rate known
    const int64_t mapped = to_unix_ns(now.tick);
    const int64_t error = now.unix_ns - mapped;
    last_error_ = error;
    Segment next{now.tick, mapped, ns_per_tick_};
    if (error > kStepNs || error < -kStepNs) {
      next.unix_ns = now.unix_ns;
    } else {
      const double correction = static_cast<double>(error) / static_cast<double>(kSlewNs);
      next.ns_per_tick = ns_per_tick_ * std::clamp(1.0 + correction, 1.0 - kMaxSlew, 1.0 + kMaxSlew);
    }
    segments_.push_back(next);
    if (segments_.size() > kKeptSegments) segments_.pop_front();
  }
  int64_t to_unix_ns(uint64_t tick) const {
    // Newest first: nearly every tick converted is recent.
    auto it = segments_.rbegin();
    while (std::next(it) != segments_.rend() && tick < it->tick) ++it;
    const double delta = static_cast<double>(static_cast<int64_t>(tick - it->tick)) * it->ns_per_tick;
    return it->unix_ns + static_cast<int64_t>(delta);
  }
  int64_t ticks_to_ns(uint64_t ticks) const { return static_cast<int64_t>(static_cast<double>(ticks) * ns_per_tick_); }
  bool calibrated() const { return ns_per_tick_ > 0; }

  static TickReading read_system() {
    const int64_t a = realtime_ns();
    const uint64_t tick = detail::now_tick();
    const int64_t b = realtime_ns();
    return TickReading{tick, a + (b - a) / 2};
  }

 private:
  // From `tick` on, unix_ns + (t - tick) * ns_per_tick.
  struct Segment {
    uint64_t tick;
    int64_t unix_ns;
    double ns_per_tick;
  };
  static constexpr int64_t kBaselineNs = 5'000'000'000;
  static constexpr int64_t kSlewNs = 1'000'000'000;
  static constexpr double kMaxSlew = 0.5;
  static constexpr int64_t kStepNs = 100'000'000;
  static constexpr int64_t kStepDetectNs = 10'000;
  // The background thread calibrates every 50 ms and drains every ring right after: 64 segments cover the
  // records of a thread that the drain reached seconds late.
  static constexpr size_t kKeptSegments = 64;

  static int64_t realtime_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }

  // The rate over the last kBaselineNs of readings: long enough that read jitter is negligible, short enough
  // to follow a slewed realtime clock.
  void measure_rate(const TickReading& now) {
    baseline_.push_back(now);
    while (baseline_.size() > 2 && now.unix_ns - baseline_[1].unix_ns >= kBaselineNs) baseline_.pop_front();
    if (baseline_.size() < 2) return;
    const TickReading& from = baseline_.front();
    ns_per_tick_ = static_cast<double>(now.unix_ns - from.unix_ns) / static_cast<double>(now.tick - from.tick);
  }

  Reader read_;
  std::deque<TickReading> baseline_;  // oldest first
  std::deque<Segment> segments_;
  double ns_per_tick_ = 0;
  int64_t last_error_ = 0;  // realtime minus the conversion at the last calibration
};

}  // namespace podscope::client
