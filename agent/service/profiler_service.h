// tensorflow.ProfilerService on the agent: Profile (a capture through CaptureSessions), Terminate and Monitor
// (a MonitorReporter). Translating only: validation, capture and monitor logic live in agent/capture/.
#pragma once

#include "agent/capture/capture_session.h"
#include "agent/capture/monitor_report.h"
#include "agent/service/metrics_exporter.h"
#include "tensorflow/profiler_service.grpc.pb.h"

namespace podscope::agent {

class ProfilerServiceImpl final : public tensorflow::ProfilerService::Service {
 public:
  ProfilerServiceImpl(CaptureSessions& captures, MonitorReporter monitor, RequestMetrics& metrics);

  grpc::Status Profile(grpc::ServerContext* context, const tensorflow::ProfileRequest* request,
                       tensorflow::ProfileResponse* response) override;
  grpc::Status Terminate(grpc::ServerContext* context, const tensorflow::TerminateRequest* request,
                         tensorflow::TerminateResponse* response) override;
  grpc::Status Monitor(grpc::ServerContext* context, const tensorflow::MonitorRequest* request,
                       tensorflow::MonitorResponse* response) override;

 private:
  CaptureSessions& captures_;
  MonitorReporter monitor_;
  RequestMetrics& metrics_;
};

}  // namespace podscope::agent
