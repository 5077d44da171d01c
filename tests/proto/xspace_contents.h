// Counting what an XSpace holds, for tests that check what a capture delivered.
#pragma once

#include <cstddef>
#include <string_view>

#include "tensorflow/xplane.pb.h"

namespace podscope::testing {

// The events on every line of the planes named `plane_name`.
inline size_t event_count(const tensorflow::profiler::XSpace& space, std::string_view plane_name) {
  size_t n = 0;
  for (const auto& plane : space.planes()) {
    if (plane.name() != plane_name) continue;
    for (const auto& line : plane.lines()) n += line.events_size();
  }
  return n;
}

}  // namespace podscope::testing
