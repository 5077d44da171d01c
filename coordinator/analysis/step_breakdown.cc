#include "coordinator/analysis/step_breakdown.h"

#include <algorithm>

namespace podscope::analysis {
namespace {

// An op starting (+1) or ending (-1) at `time_ns`.
struct Edge {
  int64_t time_ns;
  int delta;
  OpKind kind;
};

}  // namespace

std::vector<StepBreakdown> break_down_steps(std::vector<OpInterval>& ops, const std::vector<StepSpan>& steps) {
  std::vector<StepBreakdown> result(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) result[i].span = steps[i];
  if (steps.empty()) return result;

  const int64_t first = steps.front().start_ns;
  const int64_t last = steps.back().end_ns;
  std::vector<Edge> edges;
  edges.reserve(2 * ops.size());
  for (const OpInterval& op : ops) {
    if (op.end_ns <= first || op.start_ns >= last || op.end_ns <= op.start_ns) continue;
    edges.push_back({op.start_ns, +1, op.kind});
    edges.push_back({op.end_ns, -1, op.kind});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.time_ns < b.time_ns; });

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

  int64_t cursor = first;
  for (size_t i = 0; i < edges.size();) {
    const int64_t t = std::clamp(edges[i].time_ns, first, last);
    if (t > cursor) {
      add_segment(cursor, t, winning_kind());
      cursor = t;
    }
    // Apply every edge at this instant before measuring the next segment.
    const int64_t raw = edges[i].time_ns;
    for (; i < edges.size() && edges[i].time_ns == raw; ++i) active[static_cast<int>(edges[i].kind)] += edges[i].delta;
  }
  if (last > cursor) add_segment(cursor, last, -1);
  return result;
}

}  // namespace podscope::analysis
