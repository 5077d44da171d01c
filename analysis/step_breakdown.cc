#include "analysis/step_breakdown.h"

#include <algorithm>

namespace podscope::analysis {
namespace {

// When an active op of `kind` ends.
struct OpenEnd {
  int64_t time_ns;
  OpKind kind;
};

}  // namespace

std::vector<StepBreakdown> break_down_steps(std::vector<OpInterval>& ops, const std::vector<StepSpan>& steps) {
  std::vector<StepBreakdown> result(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) result[i].span = steps[i];
  if (steps.empty()) return result;

  // Ops arrive sorted by start when each line is (the usual case); sort only when they are not.
  auto by_start = [](const OpInterval& a, const OpInterval& b) { return a.start_ns < b.start_ns; };
  if (!std::is_sorted(ops.begin(), ops.end(), by_start)) std::sort(ops.begin(), ops.end(), by_start);

  const int64_t first = steps.front().start_ns;
  const int64_t last = steps.back().end_ns;
  std::array<int, kOpKindCount> active{};
  size_t step = 0;
  // Adds the segment [from, to) to every step it overlaps, as `kind` (or idle when kind < 0).
  auto add_segment = [&](int64_t from, int64_t to, int kind) {
    while (step < steps.size() && steps[step].end_ns <= from) ++step;
    for (size_t s = step; s < steps.size() && steps[s].start_ns < to; ++s) {
      const int64_t overlap = std::min(to, steps[s].end_ns) - std::max(from, steps[s].start_ns);
      if (overlap <= 0) continue;
      if (kind < 0) {
        result[s].idle_ns += overlap;
      } else {
        result[s].op_ns[kind] += overlap;
      }
    }
  };
  auto winning_kind = [&]() {
    for (int k = 0; k < kOpKindCount; ++k) {
      if (active[k] > 0) return k;
    }
    return -1;
  };

  // Sweep in start order; the ends of the ops still active wait in a min-heap (few at a time).
  std::vector<OpenEnd> open_ends;
  auto later_end = [](const OpenEnd& a, const OpenEnd& b) { return a.time_ns > b.time_ns; };
  int64_t cursor = first;
  auto advance_to = [&](int64_t t) {
    t = std::clamp(t, first, last);
    if (t > cursor) {
      add_segment(cursor, t, winning_kind());
      cursor = t;
    }
  };
  auto close_ends_until = [&](int64_t t) {
    while (!open_ends.empty() && open_ends.front().time_ns <= t) {
      advance_to(open_ends.front().time_ns);
      --active[static_cast<int>(open_ends.front().kind)];
      std::pop_heap(open_ends.begin(), open_ends.end(), later_end);
      open_ends.pop_back();
    }
  };
  for (const OpInterval& op : ops) {
    if (op.end_ns <= first || op.start_ns >= last || op.end_ns <= op.start_ns) continue;
    close_ends_until(op.start_ns);
    advance_to(op.start_ns);
    ++active[static_cast<int>(op.kind)];
    open_ends.push_back({op.end_ns, op.kind});
    std::push_heap(open_ends.begin(), open_ends.end(), later_end);
  }
  close_ends_until(last);
  if (!open_ends.empty()) advance_to(last);  // ops running past the last step
  if (last > cursor) add_segment(cursor, last, -1);
  return result;
}

}  // namespace podscope::analysis
