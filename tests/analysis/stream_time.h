// The time a GPU plane's streams ran, straight from its lines, for tests that check a tool's totals against it.
#pragma once

#include <cstdint>
#include <string>

#include "tensorflow/xplane.pb.h"

namespace podscope::analysis::testing {

// Σ duration of the events on the plane's `Stream #N(...)` lines: on compute streams (their kinds include
// `Compute`) and on the others (copies) apart.
struct StreamTime {
  int64_t compute_ns = 0;
  int64_t other_ns = 0;
};

inline StreamTime stream_time_of(const tensorflow::profiler::XPlane& plane) {
  StreamTime time;
  for (const auto& line : plane.lines()) {
    if (!line.name().starts_with("Stream #")) continue;
    const bool compute = line.name().find("(Compute") != std::string::npos;
    for (const auto& e : line.events()) (compute ? time.compute_ns : time.other_ns) += e.duration_ps() / 1000;
  }
  return time;
}

}  // namespace podscope::analysis::testing
