#include "analysis/steps/step_breakdown.h"

namespace podscope::analysis {

std::vector<StepBreakdown> break_down_steps(std::vector<OpInterval>& ops, const std::vector<StepSpan>& steps,
                                            std::vector<TimeSpan>* idle_gaps) {
  std::vector<StepBreakdown> result(steps.size());
  if (steps.empty()) return result;
  std::vector<TimeSpan> windows;
  windows.reserve(steps.size());
  for (const StepSpan& s : steps) windows.push_back({s.start_ns, s.end_ns});
  const std::vector<OpInterval> segments = disjoint_by_priority(ops, &OpInterval::kind, kOpKindsByPriority);
  std::vector<int64_t> busy;
  const auto by_kind = distribute_by_kind<kOpKindCount>(segments, &OpInterval::kind, windows, &busy, idle_gaps);
  for (size_t i = 0; i < steps.size(); ++i) {
    result[i].span = steps[i];
    result[i].op_ns = by_kind[i];
    result[i].idle_ns = steps[i].end_ns - steps[i].start_ns - busy[i];
  }
  return result;
}

}  // namespace podscope::analysis
