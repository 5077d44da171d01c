// Stragglers: the core the others wait for. In each step, the core that arrived last at the step's collectives
// (the others' all-reduce sync there is the wait it caused) straggles in that step when the step waited for it
// alone longer than the threshold; a core is reported when it straggles in more than half of the steps it was
// compared in. Decided from the waits it causes, so it holds for any number of cores from two. See docs/analysis.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/pod/step_category.h"
#include "podscope/v1/pod_analysis.pb.h"

namespace podscope::analysis {

struct StragglerOptions {
  // The step must wait for the core alone longer than this fraction of the step's mean time over its cores...
  double min_excess_fraction = 0.10;
  // ...and than this absolute floor.
  int64_t min_excess_ns = 100'000;
};

struct CoreStepTimes {
  int64_t total_ns = 0;
  CategoryDurations categories{};
  // The wait this core caused the others in the step (all_reduce_analysis.h: CausedWait).
  int64_t caused_wait_ns = 0;
  int64_t delay_ns = 0;
};

// step -> core id -> times; host names by core id for the report.
std::vector<podscope::v1::Straggler> find_stragglers(const std::map<int64_t, std::map<uint32_t, CoreStepTimes>>& steps,
                                                     const std::map<uint32_t, std::string>& host_names,
                                                     const StragglerOptions& options);

}  // namespace podscope::analysis
