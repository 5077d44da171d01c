#include "agent/local/custom_planes.h"

#include <algorithm>
#include <map>
#include <string>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::agent {
namespace {

using local::EventKind;

struct PlacedEvent {
  const local::EventMsg* event;
  const local::EventsMsg* batch;
  int64_t start_ns;  // agent clock
};

struct StepSpan {
  int64_t step_num, start_ns, end_ns;
};

std::string_view name_of(const local::EventsMsg& batch, uint32_t id) {
  for (const auto& [nid, name] : batch.names)
    if (nid == id) return name;
  return {};
}

std::string_view op_name(const PlacedEvent& p) {
  switch (p.event->kind) {
    case EventKind::kInfeed: return xspace::kInfeedEventName;
    case EventKind::kOutfeed: return xspace::kOutfeedEventName;
    case EventKind::kAllReduce: return xspace::kAllReduceEventName;
    case EventKind::kSend: return xspace::kSendEventName;
    case EventKind::kRecvDone: return xspace::kRecvDoneEventName;
    case EventKind::kCompute: {
      auto n = name_of(*p.batch, p.event->id);
      return n.empty() ? std::string_view("compute") : n;
    }
    case EventKind::kStep:
    case EventKind::kFreeForm: {
      auto n = name_of(*p.batch, p.event->id);
      return n.empty() ? std::string_view("annotation") : n;
    }
  }
  return "annotation";
}

std::optional<int64_t> step_at(const std::vector<StepSpan>& steps, int64_t t) {
  auto it =
      std::upper_bound(steps.begin(), steps.end(), t, [](int64_t v, const StepSpan& s) { return v < s.start_ns; });
  if (it == steps.begin()) return std::nullopt;
  --it;
  if (t > it->end_ns) return std::nullopt;
  return it->step_num;
}

}  // namespace

void add_custom_planes(const std::vector<LocalClientCapture>& captures, const Clock& clock,
                       const CustomPlaneOptions& options, tensorflow::profiler::XSpace& space) {
  // Per core, every event in the window, with the batch that names it.
  std::map<int32_t, std::vector<PlacedEvent>> by_core;
  for (const auto& capture : captures) {
    for (const auto& batch : capture.batches) {
      for (const auto& e : batch.events) {
        const int64_t start = clock.from_system_ns(e.start_ns);
        // Client values may be anything: an end past INT64_MAX is the end of time, not a wrapped negative.
        int64_t end = 0;
        if (__builtin_add_overflow(start, e.duration_ns, &end)) end = e.duration_ns < 0 ? INT64_MIN : INT64_MAX;
        if (end < options.window_start_ns || start > options.window_end_ns) continue;
        by_core[batch.core].push_back({&e, &batch, start});
      }
    }
    if (capture.dropped_events > 0) {
      space.add_warnings("local client pid " + std::to_string(capture.client.pid) + " (" + capture.client.program +
                         "): dropped " + std::to_string(capture.dropped_events) +
                         " events because its buffers were full");
    }
    if (!capture.complete) {
      space.add_warnings("local client pid " + std::to_string(capture.client.pid) + " (" + capture.client.program +
                         ") left or hung before the capture ended; its events may be incomplete");
    }
  }

  for (auto& [core, events] : by_core) {
    std::sort(events.begin(), events.end(),
              [](const PlacedEvent& a, const PlacedEvent& b) { return a.start_ns < b.start_ns; });
    std::vector<StepSpan> steps;
    for (const auto& p : events)
      if (p.event->kind == EventKind::kStep)
        steps.push_back({p.event->value, p.start_ns, p.start_ns + p.event->duration_ns});

    auto* plane =
        xspace::find_or_add_plane(space, std::string(xspace::kCustomPlanePrefix) + std::to_string(core), core);
    xspace::XPlaneBuilder builder(plane);
    for (const auto& p : events) {
      const local::EventMsg& e = *p.event;
      if (e.kind == EventKind::kStep) {
        auto step_name = name_of(*p.batch, e.id);
        builder.line_named(xspace::kStepsLineName)
            .add_event(step_name.empty() ? std::string_view("train") : step_name, p.start_ns, e.duration_ns)
            .add(xspace::kStepNumStat, e.value);
        continue;
      }
      auto stats = builder.line(p.batch->thread_id, "Thread " + std::to_string(p.batch->thread_id))
                       .add_event(op_name(p), p.start_ns, e.duration_ns);
      if (auto step = step_at(steps, p.start_ns)) stats.add(xspace::kStepNumStat, *step);
      switch (e.kind) {
        case EventKind::kInfeed:
        case EventKind::kOutfeed:
          if (e.value != 0) stats.add(xspace::kBytesStat, e.value);
          break;
        case EventKind::kCompute:
          if (e.value != 0) stats.add(xspace::kFlopsStat, e.value);
          if (e.value2 != 0) stats.add(xspace::kBytesStat, e.value2);
          break;
        case EventKind::kAllReduce: {
          stats.add(xspace::kAllReduceIdStat, static_cast<int64_t>(e.id));
          stats.add(xspace::kBytesStat, e.value);
          auto group = name_of(*p.batch, static_cast<uint32_t>(e.arg));
          if (!group.empty()) stats.add(xspace::kReplicaGroupStat, group);
          break;
        }
        case EventKind::kSend:
          stats.add(xspace::kChannelIdStat, static_cast<int64_t>(e.id));
          stats.add(xspace::kBytesStat, e.value);
          stats.add(xspace::kSrcCoreStat, static_cast<int64_t>(core));
          stats.add(xspace::kDstCoreStat, static_cast<int64_t>(e.arg));
          break;
        case EventKind::kRecvDone:
          stats.add(xspace::kChannelIdStat, static_cast<int64_t>(e.id));
          stats.add(xspace::kBytesStat, e.value);
          stats.add(xspace::kSrcCoreStat, static_cast<int64_t>(e.arg));
          stats.add(xspace::kDstCoreStat, static_cast<int64_t>(core));
          break;
        case EventKind::kStep:
        case EventKind::kFreeForm: break;
      }
    }
  }
}

}  // namespace podscope::agent
