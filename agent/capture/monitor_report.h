// Monitor (tensorflow.ProfilerService.Monitor) without gRPC: watches a window of the requested length on the
// capture sessions' clock (agent shutdown or the client going away ends it), then reports the device's
// utilization — the first DeviceUtilizationSource with a figure, else the host CPU's busy share over the
// window — and, at level 2, its idle time, core count and the steps annotated processes reported in the window,
// as a ProfilerServiceMonitorResult and capture_tpu_profile-style text.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/capture/capture_session.h"
#include "agent/collectors/cpu_collector.h"
#include "agent/devices/device_utilization.h"
#include "agent/steps/step_tracker.h"
#include "daemon/clock.h"
#include "tensorflow/profiler_service.pb.h"

namespace podscope::agent {

// What Monitor reports when no accelerator has a figure: the host CPU with `cores` cores.
DeviceUtilization host_cpu_device(int cores);

// capture_tpu_profile-style text for a Monitor answer ("Utilization of CPU (higher is better): 10.7%", ...).
// `device` names what the result's figures are about (its utilization_percent is not read).
std::string monitor_text(const tensorflow::ProfilerServiceMonitorResult& result, int level,
                         const DeviceUtilization& device, bool steps_observed,
                         int64_t timestamp_ns /* 0: no "Timestamp:" line */);

class MonitorReporter {
 public:
  // `devices` in order of preference (TPU before GPU); `sample_now` runs a sampling pass and returns its time
  // stamp (the window's edges, as for captures).
  MonitorReporter(CaptureSessions& captures, const CpuCollector& cpu,
                  std::vector<const DeviceUtilizationSource*> devices, std::function<int64_t()> sample_now,
                  const StepTracker& steps, const Clock& clock);

  // Watches the window and answers. `cancelled` is polled (the client went away or passed its deadline).
  // Errors: INVALID_ARGUMENT (a level other than 0, 1, 2; a duration over the limit, worded as for a capture),
  // CANCELLED (the client went away or the agent is shutting down).
  absl::StatusOr<tensorflow::MonitorResponse> report(const tensorflow::MonitorRequest& request,
                                                     const std::function<bool()>& cancelled);

 private:
  struct Window;
  absl::StatusOr<Window> watch(int64_t duration_ms, const std::function<bool()>& cancelled);
  std::optional<DeviceUtilization> accelerator() const;
  tensorflow::ProfilerServiceMonitorResult result_of(const Window& window, int level,
                                                     const std::optional<DeviceUtilization>& device) const;

  CaptureSessions& captures_;
  const CpuCollector& cpu_;
  std::vector<const DeviceUtilizationSource*> devices_;
  std::function<int64_t()> sample_now_;
  const StepTracker& steps_;
  const Clock& clock_;
};

}  // namespace podscope::agent
