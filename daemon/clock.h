// The one clock every podscope timestamp comes from: CLOCK_REALTIME in ns since the Unix epoch, plus a
// fixed offset that only tests set (the agent's --clock_offset_ns) to check cross-host clock merging.
#pragma once

#include <cstdint>
#include <ctime>

namespace podscope {

class Clock {
 public:
  explicit Clock(int64_t offset_ns = 0) : offset_ns_(offset_ns) {}

  int64_t now_ns() const {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec + offset_ns_;
  }
  int64_t offset_ns() const { return offset_ns_; }
  // Converts a reading of the unshifted system clock into this clock.
  // Saturating: system times come from client processes and may be anything.
  int64_t from_system_ns(int64_t system_ns) const {
    int64_t shifted = 0;
    if (__builtin_add_overflow(system_ns, offset_ns_, &shifted)) return offset_ns_ < 0 ? INT64_MIN : INT64_MAX;
    return shifted;
  }

 private:
  int64_t offset_ns_;
};

}  // namespace podscope
