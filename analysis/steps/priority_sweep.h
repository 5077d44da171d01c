// The one priority sweep, for both taxonomies of step time: the pod viewer's op kinds (OpKind, the kind declared
// first wins) and XProf's event types (EventType, the higher priority wins). Overlapping intervals become disjoint
// segments where, at every instant, the highest-priority kind active then has the time; the segments are then
// summed per window (a step).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace podscope::analysis {

struct TimeSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// Sorts by start. Intervals arrive line after line, each line already by start: its sorted runs are merged rather
// than the whole sorted again (intervals in no order fall back to a sort).
template <typename Interval>
void sort_by_start(std::vector<Interval>& intervals) {
  auto by_start = [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; };
  constexpr size_t kMostRuns = 64;
  std::vector<size_t> runs = {0};
  for (size_t i = 1; i < intervals.size(); ++i) {
    if (intervals[i].start_ns < intervals[i - 1].start_ns) runs.push_back(i);
    if (runs.size() > kMostRuns) {
      std::sort(intervals.begin(), intervals.end(), by_start);
      return;
    }
  }
  runs.push_back(intervals.size());
  while (runs.size() > 2) {
    std::vector<size_t> merged = {0};
    for (size_t r = 0; r + 1 < runs.size(); r += 2) {
      const size_t end = r + 2 < runs.size() ? runs[r + 2] : runs[r + 1];
      if (r + 2 < runs.size()) {
        std::inplace_merge(intervals.begin() + static_cast<std::ptrdiff_t>(runs[r]),
                           intervals.begin() + static_cast<std::ptrdiff_t>(runs[r + 1]),
                           intervals.begin() + static_cast<std::ptrdiff_t>(end), by_start);
      }
      merged.push_back(end);
    }
    runs = std::move(merged);
  }
}

// The intervals (any order; reordered by start) as disjoint segments by start: at every instant some interval is
// active, the kind first in `by_priority` (every kind of the taxonomy, the highest priority first) among those
// active; adjacent segments of one kind merged. `kind` is the interval's kind member.
template <typename Interval, typename Kind, size_t kKinds>
std::vector<Interval> disjoint_by_priority(std::vector<Interval>& intervals, Kind Interval::*kind,
                                           const std::array<Kind, kKinds>& by_priority) {
  sort_by_start(intervals);
  std::vector<Interval> segments;
  std::array<int, kKinds> active{};
  int active_count = 0;
  auto winner = [&]() {
    for (const Kind k : by_priority) {
      if (active[static_cast<size_t>(k)] > 0) return k;
    }
    return by_priority.back();
  };
  // Emits [cursor, t) as the kind winning now, merged with the segment before when it continues it.
  int64_t cursor = 0;
  auto advance_to = [&](int64_t t) {
    if (active_count > 0 && t > cursor) {
      const Kind won = winner();
      if (!segments.empty() && segments.back().end_ns == cursor && segments.back().*kind == won) {
        segments.back().end_ns = t;
      } else {
        Interval segment{};
        segment.start_ns = cursor;
        segment.end_ns = t;
        segment.*kind = won;
        segments.push_back(segment);
      }
    }
    cursor = std::max(cursor, t);
  };
  // Sweep in start order; the ends of the intervals still active wait in a min-heap (few at a time).
  struct OpenEnd {
    int64_t time_ns;
    Kind kind;
  };
  std::vector<OpenEnd> open_ends;
  auto later_end = [](const OpenEnd& a, const OpenEnd& b) { return a.time_ns > b.time_ns; };
  auto close_ends_until = [&](int64_t t) {
    while (!open_ends.empty() && open_ends.front().time_ns <= t) {
      advance_to(open_ends.front().time_ns);
      --active[static_cast<size_t>(open_ends.front().kind)];
      --active_count;
      std::pop_heap(open_ends.begin(), open_ends.end(), later_end);
      open_ends.pop_back();
    }
  };
  for (const Interval& e : intervals) {
    if (e.end_ns <= e.start_ns) continue;
    close_ends_until(e.start_ns);
    if (active_count == 0) cursor = e.start_ns;
    advance_to(e.start_ns);
    ++active[static_cast<size_t>(e.*kind)];
    ++active_count;
    open_ends.push_back({e.end_ns, e.*kind});
    std::push_heap(open_ends.begin(), open_ends.end(), later_end);
  }
  close_ends_until(std::numeric_limits<int64_t>::max());
  return segments;
}

// Disjoint segments (by start) into the windows (sorted, not overlapping): per window the time of each kind.
// `busy_ns`, when given, gets per window the time some segment covers; `gaps`, when given, the spans inside
// windows that none covers (adjacent ones merged). `kKinds`: the taxonomy's number of kinds.
template <size_t kKinds, typename Interval, typename Kind>
std::vector<std::array<int64_t, kKinds>> distribute_by_kind(const std::vector<Interval>& segments, Kind Interval::*kind,
                                                            const std::vector<TimeSpan>& windows,
                                                            std::vector<int64_t>* busy_ns = nullptr,
                                                            std::vector<TimeSpan>* gaps = nullptr) {
  std::vector<std::array<int64_t, kKinds>> result(windows.size(), std::array<int64_t, kKinds>{});
  if (busy_ns) busy_ns->assign(windows.size(), 0);
  if (windows.empty()) return result;
  auto add_gap = [&](int64_t begin, int64_t end) {
    if (!gaps || end <= begin) return;
    if (!gaps->empty() && gaps->back().end_ns == begin) {
      gaps->back().end_ns = end;
    } else {
      gaps->push_back({begin, end});
    }
  };
  // The first segment that can reach the first window; segments and windows then advance together.
  auto segment = std::lower_bound(segments.begin(), segments.end(), windows.front().start_ns,
                                  [](const Interval& s, int64_t t) { return s.end_ns <= t; });
  for (size_t w = 0; w < windows.size(); ++w) {
    const TimeSpan& window = windows[w];
    while (segment != segments.end() && segment->end_ns <= window.start_ns) ++segment;
    int64_t covered_until = window.start_ns;
    for (auto s = segment; s != segments.end() && s->start_ns < window.end_ns; ++s) {
      const int64_t begin = std::max(s->start_ns, window.start_ns);
      const int64_t end = std::min(s->end_ns, window.end_ns);
      add_gap(covered_until, begin);
      result[w][static_cast<size_t>((*s).*kind)] += end - begin;
      if (busy_ns) (*busy_ns)[w] += end - begin;
      covered_until = end;
    }
    add_gap(covered_until, window.end_ns);
  }
  return result;
}

}  // namespace podscope::analysis
