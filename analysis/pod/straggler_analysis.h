// Stragglers: per step, a core whose step time or compute exceeds the pod median by more than the
// threshold; a core is reported when it straggles in more than half of the steps it was compared in.
// See docs/analysis.md for the rule.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "podscope/v1/pod_analysis.pb.h"

namespace podscope::analysis {

struct StragglerOptions {
  // The excess must be larger than this fraction of the step's median time...
  double min_excess_fraction = 0.10;
  // ...and than this absolute floor.
  int64_t min_excess_ns = 100'000;
  // Steps with fewer cores than this are not compared (a median of two says nothing about which is slow).
  size_t min_cores = 3;
};

struct CoreStepTimes {
  int64_t total_ns = 0;
  int64_t compute_ns = 0;  // high + low flops compute
  int64_t sync_ns = 0;     // all-reduce sync
};

// step -> core id -> times; host names by core id for the report.
std::vector<podscope::v1::Straggler> find_stragglers(const std::map<int64_t, std::map<uint32_t, CoreStepTimes>>& steps,
                                                     const std::map<uint32_t, std::string>& host_names,
                                                     const StragglerOptions& options);

}  // namespace podscope::analysis
