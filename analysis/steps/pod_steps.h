// The pod's steps, read from the step databases of its hosts (step_database.h) in file order: the merge every tool
// that reads steps starts from. It applies the pod's share of the one keep rule (a step number kept only where
// every core with steps has it; when no step number is on every core, each core keeps its own) and sweeps XProf's
// combined step: per step number, all cores' time lines together, so a synchronous pod's step is one breakdown of
// the whole pod, not its slowest core's (which changes from step to step), with the spread across cores beside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "analysis/steps/event_type.h"
#include "podscope/v1/step_database.pb.h"

namespace podscope::analysis {

// One core of the pod with its kept steps.
struct PodCore {
  size_t host_index = 0;  // the host's place in file order
  const podscope::v1::HostStepDatabase* host = nullptr;
  const podscope::v1::CoreStepDatabase* core = nullptr;
  std::string host_name;                             // the plane's own, else its host's
  std::string name;                                  // "host/plane"
  std::vector<const podscope::v1::CoreStep*> steps;  // kept in the pod, by start
};

// XProf's combined step: every core's time line of the step swept together by priority (in coordinator time: each
// host's clock offset taken off), over the span of its longest core (ties: the one waiting longest for input).
struct PodStep {
  int64_t step_num = 0;
  int64_t duration_ns = 0;
  EventTypeDurations type_ns{};  // sums to duration_ns; time nothing explains is kUnknown
  const PodCore* longest = nullptr;
  uint32_t cores = 0;
  int64_t min_step_ns = 0;
  int64_t max_step_ns = 0;
  int64_t min_wait_ns = 0;  // waiting for input (HOST_WAIT_INPUT), per core
  int64_t max_wait_ns = 0;
};

struct PodSteps {
  std::span<const podscope::v1::HostStepDatabase> hosts;
  std::vector<PodCore> cores;                     // every core, in host then plane order
  std::vector<PodStep> steps;                     // by step number
  std::map<std::string, uint64_t> dropped_steps;  // reason → steps dropped for it
  uint32_t device_planes = 0;
  uint32_t planes_without_steps = 0;
  std::vector<std::string> notes;
  bool has_steps() const;
};

// The reasons a step is dropped, as the tools print them.
inline constexpr std::string_view kDroppedAtWindowEdge = "partial: cut by the capture window's edge";
inline constexpr std::string_view kDroppedNoDeviceWork = "no device work in the step";
inline constexpr std::string_view kDroppedMissingOnCore = "missing on some core";

// A core's step time by event type.
EventTypeDurations type_ns_of(const podscope::v1::CoreStep& step);

// `hosts` outlive the result.
PodSteps merge_step_databases(std::span<const podscope::v1::HostStepDatabase> hosts);

}  // namespace podscope::analysis
