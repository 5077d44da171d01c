// tensorflow.ProfilerService on the agent: Profile (a capture through CaptureSessions), Terminate, Monitor
// (a MonitorReporter) and continuous profiling (the flight recorder: StartContinuousProfiling, GetSnapshot,
// StopContinuousProfiling), every call gated by allowed_clients (tls::CallAuthorizer).
// Translating only: validation, capture and monitor logic live in agent/capture/.
#pragma once

#include <atomic>
#include <cstdint>

#include "agent/capture/capture_session.h"
#include "agent/capture/monitor_report.h"
#include "agent/recorder/flight_recorder.h"
#include "agent/service/agent_metrics.h"
#include "agent/service/raw_answer.h"
#include "tls/call_authorizer.h"
#include "tensorflow/profiler_service.grpc.pb.h"

namespace podscope::agent {

// Profile and GetSnapshot answer raw: the XSpace goes out as the bytes it was built as (raw_answer.h).
class ProfilerServiceImpl final
    : public tensorflow::ProfilerService::WithRawCallbackMethod_Profile<
          tensorflow::ProfilerService::WithRawCallbackMethod_GetSnapshot<tensorflow::ProfilerService::Service>> {
 public:
  ProfilerServiceImpl(CaptureSessions& captures, MonitorReporter monitor, RequestMetrics& metrics,
                      int64_t max_concurrent_monitors, FlightRecorder& recorder, tls::CallAuthorizer& authorizer);

  // A tensorflow.ProfileRequest, answered with a tensorflow.ProfileResponse.
  grpc::ServerUnaryReactor* Profile(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::Status Terminate(grpc::ServerContext* context, const tensorflow::TerminateRequest* request,
                         tensorflow::TerminateResponse* response) override;
  grpc::Status Monitor(grpc::ServerContext* context, const tensorflow::MonitorRequest* request,
                       tensorflow::MonitorResponse* response) override;
  // Starts the flight recorder with the request's duration as its window (else kDefaultContinuousWindowMs);
  // ALREADY_EXISTS when it records (as it does from the start with flight_recorder_seconds > 0).
  grpc::Status StartContinuousProfiling(grpc::ServerContext* context, const tensorflow::ProfileRequest* request,
                                        tensorflow::ContinuousProfilingResponse* response) override;
  // What was recorded since the previous snapshot, as an XSpace (emit_xspace's form) in a
  // tensorflow.ProfileResponse; NOT_FOUND when off.
  grpc::ServerUnaryReactor* GetSnapshot(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::Status StopContinuousProfiling(grpc::ServerContext* context,
                                       const tensorflow::StopContinuousProfilingRequest* request,
                                       tensorflow::StopContinuousProfilingResponse* response) override;

  static constexpr int64_t kDefaultContinuousWindowMs = 30'000;

 private:
  grpc::Status run_profile(grpc::CallbackServerContext& context, const tensorflow::ProfileRequest& request,
                           grpc::ByteBuffer& response);
  grpc::Status take_snapshot(grpc::ByteBuffer& response);

  CaptureSessions& captures_;
  MonitorReporter monitor_;
  RequestMetrics& metrics_;
  // Each Monitor holds a server thread for its whole duration: beyond this many they are refused.
  const int64_t max_concurrent_monitors_;
  std::atomic<int64_t> monitors_in_flight_{0};
  FlightRecorder& recorder_;
  const size_t continuous_max_bytes_ = size_t{64} << 20;
  tls::CallAuthorizer& authorizer_;
  AnswerThreads answer_threads_;
};

}  // namespace podscope::agent
