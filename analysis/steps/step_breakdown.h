// Breaks one core's time into op kinds per step: the priority sweep (priority_sweep.h) over the core's op
// intervals, where at every instant the time goes to the highest-priority op kind active then (OpKind order),
// or to idle.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "analysis/steps/op_classifier.h"
#include "analysis/steps/priority_sweep.h"
#include "analysis/steps/step_spans.h"

namespace podscope::analysis {

struct OpInterval {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  OpKind kind = OpKind::kLowFlopsCompute;
};

struct StepBreakdown {
  StepSpan span;
  std::array<int64_t, kOpKindCount> op_ns{};  // indexed by OpKind
  int64_t idle_ns = 0;
  // op_ns summed with idle_ns equals the step's duration. Of the idle time, what host work filled (at most
  // idle_ns together): kernel launches, host compute, compilation, waits for input.
  int64_t kernel_launch_ns = 0;
  int64_t host_compute_ns = 0;
  int64_t compilation_ns = 0;
  int64_t input_wait_ns = 0;
};

// `steps` sorted by start and not overlapping; `ops` in any order (it is reordered). `idle_gaps`, when given,
// gets the spans inside steps where no op ran.
std::vector<StepBreakdown> break_down_steps(std::vector<OpInterval>& ops, const std::vector<StepSpan>& steps,
                                            std::vector<TimeSpan>* idle_gaps = nullptr);

}  // namespace podscope::analysis
