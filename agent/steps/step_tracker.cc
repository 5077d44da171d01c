#include "agent/steps/step_tracker.h"

#include <algorithm>
#include <set>

namespace podscope::agent {

void StepTracker::record(const StepRecord& step) {
  std::lock_guard lock(mu_);
  steps_.push_back(step);
  while (steps_.size() > capacity_) steps_.pop_front();
}

std::optional<StepSummary> StepTracker::summarize(int64_t since_ns, int64_t until_ns) const {
  std::lock_guard lock(mu_);
  StepSummary s;
  std::set<int32_t> cores;
  double sum_ms = 0, sum_infeed = 0;
  for (const StepRecord& r : steps_) {
    if (r.end_ns < since_ns || r.end_ns > until_ns || r.end_ns <= r.begin_ns) continue;
    const double ms = static_cast<double>(r.end_ns - r.begin_ns) / 1e6;
    const double infeed = 100.0 * static_cast<double>(r.infeed_ns) / static_cast<double>(r.end_ns - r.begin_ns);
    if (s.steps == 0) {
      s.step_time_ms_min = s.step_time_ms_max = ms;
      s.infeed_percent_min = s.infeed_percent_max = infeed;
    }
    s.step_time_ms_min = std::min(s.step_time_ms_min, ms);
    s.step_time_ms_max = std::max(s.step_time_ms_max, ms);
    s.infeed_percent_min = std::min(s.infeed_percent_min, infeed);
    s.infeed_percent_max = std::max(s.infeed_percent_max, infeed);
    sum_ms += ms;
    sum_infeed += infeed;
    cores.insert(r.core_id);
    ++s.steps;
  }
  if (s.steps == 0) return std::nullopt;
  s.step_time_ms_avg = sum_ms / static_cast<double>(s.steps);
  s.infeed_percent_avg = sum_infeed / static_cast<double>(s.steps);
  s.cores = static_cast<int32_t>(cores.size());
  return s;
}

}  // namespace podscope::agent
