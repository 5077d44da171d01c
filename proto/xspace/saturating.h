// Time arithmetic on values that come from files and client processes, which may be anything: a sum past the
// int64 range is the end (or the beginning) of time, never a wrapped value or undefined behaviour.
#pragma once

#include <cstdint>
#include <limits>

namespace podscope::xspace {

inline int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }
  return sum;
}

}  // namespace podscope::xspace
