// What an XSpace holds, for tests that check what a capture or a file delivered: the XSpace of a file, its events
// counted, its warnings, its annotated steps.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "proto/xspace/names.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::testing {

// The XSpace a serialized file holds (a failure of the running test, and what parsed, when it does not parse).
inline tensorflow::profiler::XSpace read_xspace_file(const std::filesystem::path& path) {
  tensorflow::profiler::XSpace space;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(space.ParseFromIstream(&in)) << path;
  return space;
}

// The events on every line of the planes named `plane_name`.
inline size_t event_count(const tensorflow::profiler::XSpace& space, std::string_view plane_name) {
  size_t n = 0;
  for (const auto& plane : space.planes()) {
    if (plane.name() != plane_name) continue;
    for (const auto& line : plane.lines()) n += line.events_size();
  }
  return n;
}

// Whether one of the space's warnings holds `text`.
inline bool has_warning(const tensorflow::profiler::XSpace& space, std::string_view text) {
  for (const auto& w : space.warnings()) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

// Every warning of the space, a line each: what a failed expectation prints.
inline std::string warnings_of(const tensorflow::profiler::XSpace& space) {
  std::string all;
  for (const auto& w : space.warnings()) all += w + "\n";
  return all;
}

// Per annotated core (its plane's id): the steps on its steps line as [begin, end] ns, sorted.
inline std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> steps_by_core(
    const tensorflow::profiler::XSpace& space) {
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> out;
  for (const auto& plane : space.planes()) {
    if (!plane.name().starts_with(xspace::kCustomPlanePrefix)) continue;
    for (const auto& line : plane.lines()) {
      if (line.name() != xspace::kStepsLineName) continue;
      for (const auto& e : line.events()) {
        const int64_t begin = line.timestamp_ns() + e.offset_ps() / 1000;
        out[plane.id()].push_back({begin, begin + e.duration_ps() / 1000});
      }
    }
  }
  for (auto& [core, steps] : out) std::sort(steps.begin(), steps.end());
  return out;
}

}  // namespace podscope::testing
