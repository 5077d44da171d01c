#include "analysis/steps/core_activity.h"

#include <algorithm>

namespace podscope::analysis {
namespace {

bool is_compute(OpKind kind) { return kind == OpKind::kHighFlopsCompute || kind == OpKind::kLowFlopsCompute; }
bool is_communication(OpKind kind) {
  return kind == OpKind::kCollective || kind == OpKind::kSend || kind == OpKind::kRecvDone;
}

// Intervals by start merged where they overlap or touch, added to `merged` (by start, disjoint).
class Union {
 public:
  void add(int64_t start, int64_t end) {
    if (end <= start) return;
    if (!merged_.empty() && start <= merged_.back().end_ns) {
      merged_.back().end_ns = std::max(merged_.back().end_ns, end);
    } else {
      merged_.push_back({start, end});
    }
  }
  int64_t total() const {
    int64_t sum = 0;
    for (const TimeSpan& s : merged_) sum += s.end_ns - s.start_ns;
    return sum;
  }
  const std::vector<TimeSpan>& spans() const { return merged_; }

 private:
  std::vector<TimeSpan> merged_;
};

int64_t intersection(const std::vector<TimeSpan>& a, const std::vector<TimeSpan>& b) {
  int64_t sum = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t start = std::max(a[i].start_ns, b[j].start_ns);
    const int64_t end = std::min(a[i].end_ns, b[j].end_ns);
    if (end > start) sum += end - start;
    if (a[i].end_ns < b[j].end_ns) {
      ++i;
    } else {
      ++j;
    }
  }
  return sum;
}

int64_t percentile(std::vector<int64_t>& values, double fraction) {
  if (values.empty()) return 0;
  const size_t k = std::min(values.size() - 1, static_cast<size_t>(fraction * static_cast<double>(values.size())));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}

}  // namespace

podscope::v1::CoreActivity activity_of_ops(const std::vector<OpInterval>& ops) {
  podscope::v1::CoreActivity activity;
  if (ops.empty()) return activity;
  Union busy, compute, communication;
  int64_t last = ops.front().end_ns;
  for (const OpInterval& op : ops) {
    last = std::max(last, op.end_ns);
    busy.add(op.start_ns, op.end_ns);
    if (is_compute(op.kind)) compute.add(op.start_ns, op.end_ns);
    if (is_communication(op.kind)) communication.add(op.start_ns, op.end_ns);
  }
  activity.set_first_ns(ops.front().start_ns);
  activity.set_last_ns(last);
  activity.set_busy_ns(busy.total());
  activity.set_compute_ns(compute.total());
  activity.set_communication_ns(communication.total());
  activity.set_overlap_ns(intersection(compute.spans(), communication.spans()));
  return activity;
}

podscope::v1::CoreActivity activity_of_time_line(const std::vector<TypedInterval>& segments, int64_t first_ns,
                                                 int64_t last_ns) {
  podscope::v1::CoreActivity activity;
  activity.set_first_ns(first_ns);
  activity.set_last_ns(last_ns);
  for (const TypedInterval& s : segments) {
    const int64_t ns = s.end_ns - s.start_ns;
    if (s.type == EventType::kUnknown) continue;
    activity.set_busy_ns(activity.busy_ns() + ns);
    if (s.type == EventType::kDeviceCollectives) {
      activity.set_communication_ns(activity.communication_ns() + ns);
    } else if (s.type != EventType::kHostWaitInput && s.type != EventType::kHostToDevice) {
      activity.set_compute_ns(activity.compute_ns() + ns);
    }
  }
  return activity;
}

void add_stream_activity(std::vector<StreamEvents>& streams, const RuntimeCalls& calls,
                         podscope::v1::CoreActivity& activity) {
  // Each stream by start (a line usually is already), then all of them: merged as sorted runs.
  size_t count = 0;
  for (StreamEvents& stream : streams) {
    auto by_start = [](const StreamEvent& a, const StreamEvent& b) { return a.start_ns < b.start_ns; };
    if (!std::is_sorted(stream.events.begin(), stream.events.end(), by_start))
      std::stable_sort(stream.events.begin(), stream.events.end(), by_start);
    count += stream.events.size();
  }
  std::vector<OpInterval> ops;
  ops.reserve(count);
  for (const StreamEvents& stream : streams) {
    for (const StreamEvent& e : stream.events) ops.push_back({e.start_ns, e.end_ns, e.kind});
  }
  sort_by_start(ops);
  activity = activity_of_ops(ops);
  std::vector<int64_t> delays;
  delays.reserve(count);
  auto& launches = *activity.mutable_launches();
  for (const StreamEvents& stream : streams) {
    const std::vector<StreamEvent>& events = stream.events;
    auto& idle = *activity.add_streams();
    idle.set_name(stream.name);
    idle.set_stream_id(stream.stream_id);
    idle.set_events(events.size());
    for (size_t i = 0; i < events.size(); ++i) {
      const StreamEvent& e = events[i];
      const auto call = e.correlation_id != 0 ? calls.find(e.correlation_id) : calls.end();
      if (i > 0) {
        const int64_t previous_end = events[i - 1].end_ns;
        const int64_t gap = e.start_ns - previous_end;
        if (call != calls.end() && call->second.start_ns > previous_end) {
          idle.set_host_wait_ns(idle.host_wait_ns() + gap);
        } else if (gap < kKernelWaitNs) {
          idle.set_kernel_wait_ns(idle.kernel_wait_ns() + gap);
        } else {
          idle.set_other_ns(idle.other_ns() + gap);
        }
      }
      if (call == calls.end() || !call->second.launch) continue;
      const int64_t call_ns = call->second.end_ns - call->second.start_ns;
      const int64_t delay = std::max<int64_t>(0, e.start_ns - call->second.end_ns);
      launches.set_launches(launches.launches() + 1);
      launches.set_delay_total_ns(launches.delay_total_ns() + delay);
      launches.set_delay_max_ns(std::max(launches.delay_max_ns(), delay));
      if (delay > kDelayedLaunchNs) launches.set_delayed_launches(launches.delayed_launches() + 1);
      launches.set_call_total_ns(launches.call_total_ns() + call_ns);
      if (call_ns > kLongLaunchCallNs) launches.set_long_calls(launches.long_calls() + 1);
      if (e.end_ns - e.start_ns < call_ns) {
        launches.set_short_events(launches.short_events() + 1);
        launches.set_short_event_ns(launches.short_event_ns() + e.end_ns - e.start_ns);
      }
      delays.push_back(delay);
    }
  }
  launches.set_delay_p50_ns(percentile(delays, 0.50));
  launches.set_delay_p95_ns(percentile(delays, 0.95));
}

}  // namespace podscope::analysis
