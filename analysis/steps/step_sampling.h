// Which steps the per-step tables of the outputs show. A capture of a fast trainer holds thousands of steps; the
// tools' per-step tables (the pod viewer's step records, the step-time graph) show at most kMaxStepsShown of them,
// while every summary, average and verdict counts every step. See docs/analysis.md, "Bounded outputs".
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace podscope::analysis {

inline constexpr size_t kMaxStepsShown = 100;
// The pod summary lists this many of the slowest channel transfers; their steps are always shown.
inline constexpr size_t kSlowestChannelsListed = 5;

// Per step (in step order, `duration_ns` its time), whether it is shown: every step when there are at most
// `max_shown`; otherwise the steps in `must_show` (indices), then the slowest up to half of `max_shown`, then steps
// evenly spaced over the run up to `max_shown` in all.
std::vector<bool> steps_shown(const std::vector<int64_t>& duration_ns, const std::vector<size_t>& must_show = {},
                              size_t max_shown = kMaxStepsShown);

}  // namespace podscope::analysis
