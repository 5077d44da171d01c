// tensorflow.ProfilerService on the agent: Profile (a capture through CaptureSessions), Terminate and Monitor.
// Translating only: validation and capture logic live in agent/capture/.
#pragma once

#include <functional>
#include <vector>

#include "agent/capture/capture_session.h"
#include "agent/collectors/cpu_collector.h"
#include "agent/devices/device_utilization.h"
#include "agent/service/metrics_exporter.h"
#include "agent/steps/step_tracker.h"
#include "daemon/clock.h"
#include "tensorflow/profiler_service.grpc.pb.h"

namespace podscope::agent {

// What Monitor reports when no accelerator has a figure: the host CPU with `cores` cores.
DeviceUtilization host_cpu_device(int cores);

// capture_tpu_profile-style text for a Monitor answer ("Utilization of CPU (higher is better): 10.7%", ...).
// `device` names what the result's figures are about (its utilization_percent is not read).
std::string monitor_text(const tensorflow::ProfilerServiceMonitorResult& result, int level,
                         const DeviceUtilization& device, bool steps_observed,
                         int64_t timestamp_ns /* 0: no "Timestamp:" line */);

class ProfilerServiceImpl final : public tensorflow::ProfilerService::Service {
 public:
  // Monitor reports the first of `devices` that has a figure (TPU before GPU), else the host CPU.
  ProfilerServiceImpl(CaptureSessions& captures, const CpuCollector& cpu,
                      std::vector<const DeviceUtilizationSource*> devices, std::function<int64_t()> sample_now,
                      const StepTracker& steps, const Clock& clock, RequestMetrics& metrics);

  grpc::Status Profile(grpc::ServerContext* context, const tensorflow::ProfileRequest* request,
                       tensorflow::ProfileResponse* response) override;
  grpc::Status Terminate(grpc::ServerContext* context, const tensorflow::TerminateRequest* request,
                         tensorflow::TerminateResponse* response) override;
  grpc::Status Monitor(grpc::ServerContext* context, const tensorflow::MonitorRequest* request,
                       tensorflow::MonitorResponse* response) override;

 private:
  CaptureSessions& captures_;
  const CpuCollector& cpu_;
  std::vector<const DeviceUtilizationSource*> devices_;
  std::function<int64_t()> sample_now_;
  const StepTracker& steps_;
  const Clock& clock_;
  RequestMetrics& metrics_;
};

}  // namespace podscope::agent
