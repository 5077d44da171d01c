// Pod monitoring (`podscope capture --monitoring_level 1|2`): one round calls Monitor on every worker at
// once for the same duration and aggregates step times across the pod.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pod_capture/agent_connection.h"

namespace podscope::pod_capture {

struct WorkerMonitorResult {
  std::string address;
  std::string name;   // the agent's host name when it reported one (GetStatus), else the address
  std::string error;  // empty when the call succeeded
  tensorflow::MonitorResponse response;
};

struct PodStepTimes {
  double avg_ms = 0;  // mean of the workers' averages
  double min_ms = 0;
  double max_ms = 0;
  std::string slowest_worker;  // the worker with the highest average step time
  int workers = 0;             // workers that reported step times
};

// Each agent's host name (podscope.v1.Agent/GetStatus), or its address where it has none (a plain TF server).
std::vector<std::string> worker_names(const std::vector<AgentConnection*>& agents);

std::vector<WorkerMonitorResult> monitor_round(const std::vector<AgentConnection*>& agents,
                                               const std::vector<std::string>& names, int64_t duration_ms,
                                               int monitoring_level, bool display_timestamp);

std::optional<PodStepTimes> aggregate_step_times(const std::vector<WorkerMonitorResult>& results);

// "Pod Monitoring Results (Sample N):" then each worker's lines and the pod aggregate.
std::string format_monitor_round(int sample, const std::vector<WorkerMonitorResult>& results);

}  // namespace podscope::pod_capture
