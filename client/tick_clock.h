// Converts the annotation hot path's cheap ticks (TSC) into Unix ns. Only the background thread uses it:
// it pairs a tick reading with CLOCK_REALTIME now and then, and converts with the rate measured over the
// longest baseline seen, re-anchored every few seconds so CLOCK_REALTIME steps (NTP) are followed.
#pragma once

#include <cstdint>
#include <ctime>

#include "client/podscope.h"

namespace podscope::client {

class TickClock {
 public:
  TickClock() {
    anchor();
    first_tick_ = anchor_tick_;
    first_ns_ = anchor_ns_;
  }

  // Call periodically (every few ms to s). Refines the rate and moves the anchor.
  void calibrate() {
    uint64_t tick;
    int64_t ns;
    read_pair(tick, ns);
    if (tick > first_tick_ && ns > first_ns_) {
      ns_per_tick_ = static_cast<double>(ns - first_ns_) / static_cast<double>(tick - first_tick_);
    }
    if (ns - anchor_ns_ > kReanchorNs) {
      anchor_tick_ = tick;
      anchor_ns_ = ns;
    }
  }
  int64_t to_unix_ns(uint64_t tick) const {
    const double delta = static_cast<double>(static_cast<int64_t>(tick - anchor_tick_)) * ns_per_tick_;
    return anchor_ns_ + static_cast<int64_t>(delta);
  }
  int64_t ticks_to_ns(uint64_t ticks) const { return static_cast<int64_t>(static_cast<double>(ticks) * ns_per_tick_); }
  bool calibrated() const { return ns_per_tick_ > 0; }

 private:
  static constexpr int64_t kReanchorNs = 5'000'000'000;
  static int64_t realtime_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }
  // The tick read between two realtime reads, paired with their midpoint.
  static void read_pair(uint64_t& tick, int64_t& ns) {
    const int64_t a = realtime_ns();
    tick = detail::now_tick();
    const int64_t b = realtime_ns();
    ns = a + (b - a) / 2;
  }
  void anchor() { read_pair(anchor_tick_, anchor_ns_); }

  uint64_t first_tick_ = 0, anchor_tick_ = 0;
  int64_t first_ns_ = 0, anchor_ns_ = 0;
  double ns_per_tick_ = 0;
};

}  // namespace podscope::client
