// tensorflow.ProfilerService on the agent: Profile (a capture through CaptureSessions), Terminate and Monitor.
// Translating only: validation and capture logic live in agent/capture/.
#pragma once

#include <functional>

#include "agent/capture/capture_session.h"
#include "agent/collectors/cpu_collector.h"
#include "agent/service/metrics_exporter.h"
#include "agent/steps/step_tracker.h"
#include "daemon/clock.h"
#include "tensorflow/profiler_service.grpc.pb.h"

namespace podscope::agent {

grpc::Status to_grpc(const absl::Status& status);

// capture_tpu_profile-style text for a Monitor answer ("Utilization of CPU (higher is better): 10.7%", ...).
std::string monitor_text(const tensorflow::ProfilerServiceMonitorResult& result, int level, int cores,
                         bool steps_observed, int64_t timestamp_ns /* 0: no "Timestamp:" line */);

class ProfilerServiceImpl final : public tensorflow::ProfilerService::Service {
 public:
  ProfilerServiceImpl(CaptureSessions& captures, const CpuCollector& cpu, std::function<int64_t()> sample_now,
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
  std::function<int64_t()> sample_now_;
  const StepTracker& steps_;
  const Clock& clock_;
  RequestMetrics& metrics_;
};

}  // namespace podscope::agent
