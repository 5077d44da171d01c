#include "analysis/steps/pod_steps.h"

#include <algorithm>

#include "analysis/steps/step_events.h"

namespace podscope::analysis {
namespace {

using podscope::v1::CoreStep;
using podscope::v1::CoreStepDatabase;
using podscope::v1::HostStepDatabase;

int64_t duration_of(const CoreStep& step) { return step.end_ns() - step.start_ns(); }

void count_dropped(PodSteps& pod, std::string_view reason, uint64_t count) {
  if (count > 0) pod.dropped_steps[std::string(reason)] += count;
}

// Every core of every host with its host-kept steps.
void read_cores(PodSteps& pod) {
  for (size_t h = 0; h < pod.hosts.size(); ++h) {
    const HostStepDatabase& host = pod.hosts[h];
    for (const CoreStepDatabase& core : host.cores()) {
      PodCore& c = pod.cores.emplace_back();
      c.host_index = h;
      c.host = &host;
      c.core = &core;
      c.host_name = core.has_host_name() ? core.host_name() : host.host_name();
      c.name = c.host_name + core.plane_name();
      for (const CoreStep& step : core.steps()) c.steps.push_back(&step);
      if (core.kind() != podscope::v1::CORE_KIND_HOST) ++pod.device_planes;
      if (core.steps_found() == 0) ++pod.planes_without_steps;
      count_dropped(pod, kDroppedAtWindowEdge, core.steps_cut_by_window());
      count_dropped(pod, kDroppedNoDeviceWork, core.steps_without_device_work());
    }
  }
}

// The pod's share of the keep rule: a step is kept when every core with steps has it; when no step number is on
// every core (cores that number their steps independently), each core keeps its own.
void keep_steps_on_every_core(PodSteps& pod) {
  std::map<int64_t, size_t> cores_with_step;
  size_t stepped_cores = 0;
  for (const PodCore& c : pod.cores) {
    if (c.steps.empty()) continue;
    ++stepped_cores;
    for (const CoreStep* s : c.steps) ++cores_with_step[s->step_num()];
  }
  const bool common_step = std::any_of(cores_with_step.begin(), cores_with_step.end(),
                                       [&](const auto& entry) { return entry.second == stepped_cores; });
  if (common_step) {
    for (PodCore& c : pod.cores) {
      std::erase_if(c.steps, [&](const CoreStep* s) {
        const bool missing = cores_with_step[s->step_num()] != stepped_cores;
        if (missing) ++pod.dropped_steps[std::string(kDroppedMissingOnCore)];
        return missing;
      });
    }
  } else if (stepped_cores > 1) {
    pod.notes.push_back("no step number is on every core: each core's steps are kept as numbered");
  }
}

// The core's time line within `step`, in coordinator time.
void add_time_line(const PodCore& c, const CoreStep& step, std::vector<TypedInterval>& out) {
  const CoreStepDatabase& core = *c.core;
  const int64_t offset = c.host->clock_offset_ns();
  const auto& starts = core.segment_start_ns();
  auto first = std::lower_bound(starts.begin(), starts.end(), step.start_ns());
  for (auto it = first; it != starts.end() && *it < step.end_ns(); ++it) {
    const int i = static_cast<int>(it - starts.begin());
    out.push_back({*it - offset, core.segment_end_ns(i) - offset, static_cast<EventType>(core.segment_type(i))});
  }
}

// Per step number: its longest core and the spread across cores, then the cores' time lines swept together over the
// longest core's span.
void combine_steps(PodSteps& pod) {
  struct Across {
    PodStep step;
    const CoreStep* longest_step = nullptr;
    std::vector<std::pair<const PodCore*, const CoreStep*>> on_cores;
  };
  std::map<int64_t, Across> by_number;
  for (const PodCore& c : pod.cores) {
    for (const CoreStep* s : c.steps) {
      Across& a = by_number[s->step_num()];
      const int64_t duration = duration_of(*s);
      const int64_t wait = type_ns_of(*s)[static_cast<int>(EventType::kHostWaitInput)];
      const bool longer =
          a.longest_step == nullptr || duration > duration_of(*a.longest_step) ||
          (duration == duration_of(*a.longest_step) &&
           generic_breakdown(type_ns_of(*s)).input_ns() > generic_breakdown(type_ns_of(*a.longest_step)).input_ns());
      if (longer) {
        a.longest_step = s;
        a.step.longest = &c;
      }
      PodStep& p = a.step;
      if (p.cores == 0) {
        p.min_wait_ns = p.max_wait_ns = wait;
        p.min_step_ns = p.max_step_ns = duration;
      } else {
        p.min_wait_ns = std::min(p.min_wait_ns, wait);
        p.max_wait_ns = std::max(p.max_wait_ns, wait);
        p.min_step_ns = std::min(p.min_step_ns, duration);
        p.max_step_ns = std::max(p.max_step_ns, duration);
      }
      ++p.cores;
      a.on_cores.emplace_back(&c, s);
    }
  }
  for (auto& [step_num, a] : by_number) {
    PodStep& p = a.step;
    p.step_num = step_num;
    p.duration_ns = duration_of(*a.longest_step);
    const int64_t offset = p.longest->host->clock_offset_ns();
    const std::vector<TimeSpan> window = {{a.longest_step->start_ns() - offset, a.longest_step->end_ns() - offset}};
    std::vector<TypedInterval> lines;
    for (const auto& [core, step] : a.on_cores) add_time_line(*core, *step, lines);
    p.type_ns = distribute_segments(disjoint_by_priority(lines), window).front();
    pod.steps.push_back(p);
  }
}

}  // namespace

EventTypeDurations type_ns_of(const CoreStep& step) {
  EventTypeDurations d{};
  for (int t = 0; t < kEventTypeCount && t < step.type_ns_size(); ++t) d[t] = step.type_ns(t);
  return d;
}

bool PodSteps::has_steps() const {
  return std::any_of(cores.begin(), cores.end(), [](const PodCore& c) { return !c.steps.empty(); });
}

PodSteps merge_step_databases(std::span<const HostStepDatabase> hosts) {
  PodSteps pod;
  pod.hosts = hosts;
  read_cores(pod);
  keep_steps_on_every_core(pod);
  combine_steps(pod);
  return pod;
}

}  // namespace podscope::analysis
