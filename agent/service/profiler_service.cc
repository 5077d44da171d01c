#include "agent/service/profiler_service.h"

#include "daemon/grpc_status.h"
#include "daemon/log.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::agent {

ProfilerServiceImpl::ProfilerServiceImpl(CaptureSessions& captures, MonitorReporter monitor, RequestMetrics& metrics,
                                         int64_t max_concurrent_monitors, FlightRecording& recording,
                                         tls::CallAuthorizer& authorizer)
    : captures_(captures),
      monitor_(std::move(monitor)),
      metrics_(metrics),
      max_concurrent_monitors_(max_concurrent_monitors),
      recording_(recording),
      authorizer_(authorizer) {}

grpc::Status ProfilerServiceImpl::Profile(grpc::ServerContext* context, const tensorflow::ProfileRequest* request,
                                          tensorflow::ProfileResponse* response) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "Profile"); !allowed.ok()) return allowed;
  absl::StatusOr<CaptureResult> result = captures_.run(*request, [context] { return context->IsCancelled(); });
  if (!result.ok()) {
    PODSCOPE_LOG(kWarning) << "Profile refused: " << result.status().message();
    metrics_.captures_refused.Increment();
    return to_grpc_status(result.status());
  }
  metrics_.captures_served.Increment();
  response->set_empty_trace(result->empty_trace);
  // As TensorFlow's server: the XSpace asked for in the response goes there (and to no file); otherwise it is in
  // the file and the response holds nothing more. A capture that could not be written comes back as tool_data
  // `xplane.pb`, which TensorFlow's client saves as <host>.xplane.pb on its side.
  if (!writes_capture_file(*request)) {
    response->mutable_xspace()->Swap(&result->space);
  } else if (result->written_path.empty()) {
    tensorflow::ProfileToolData* tool = response->add_tool_data();
    tool->set_name("xplane.pb");
    result->space.SerializeToString(tool->mutable_data());
  }
  return grpc::Status::OK;
}

grpc::Status ProfilerServiceImpl::Terminate(grpc::ServerContext* context, const tensorflow::TerminateRequest* request,
                                            tensorflow::TerminateResponse*) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "Terminate"); !allowed.ok()) return allowed;
  captures_.terminate(request->session_id());
  return grpc::Status::OK;
}

grpc::Status ProfilerServiceImpl::Monitor(grpc::ServerContext* context, const tensorflow::MonitorRequest* request,
                                          tensorflow::MonitorResponse* response) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "Monitor"); !allowed.ok()) return allowed;
  struct InFlight {
    std::atomic<int64_t>& count;
    ~InFlight() { count.fetch_sub(1); }
  } in_flight{monitors_in_flight_};
  if (monitors_in_flight_.fetch_add(1) >= max_concurrent_monitors_) {
    metrics_.monitors_refused.Increment();
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        std::to_string(max_concurrent_monitors_) +
                            " Monitor calls are already in flight (max_concurrent_monitors); try again later");
  }
  absl::StatusOr<tensorflow::MonitorResponse> report =
      monitor_.report(*request, [context] { return context->IsCancelled(); });
  if (!report.ok()) return to_grpc_status(report.status());
  metrics_.monitors_served.Increment();
  response->Swap(&*report);
  return grpc::Status::OK;
}

grpc::Status ProfilerServiceImpl::StartContinuousProfiling(grpc::ServerContext* context,
                                                           const tensorflow::ProfileRequest* request,
                                                           tensorflow::ContinuousProfilingResponse*) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "StartContinuousProfiling"); !allowed.ok()) return allowed;
  const uint64_t requested =
      request->opts().duration_ms() != 0 ? request->opts().duration_ms() : request->duration_ms();
  const int64_t window_ms = requested == 0 ? kDefaultContinuousWindowMs : duration_or_default_ms(requested);
  if (absl::Status s = check_duration_limit(window_ms, captures_.limits()); !s.ok()) return to_grpc_status(s);
  return to_grpc_status(recording_.start(FlightRecorderSettings{window_ms * 1'000'000, continuous_max_bytes_}));
}

grpc::Status ProfilerServiceImpl::GetSnapshot(grpc::ServerContext* context, const tensorflow::GetSnapshotRequest*,
                                              tensorflow::ProfileResponse* response) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "GetSnapshot"); !allowed.ok()) return allowed;
  absl::StatusOr<RecorderSnapshot> snapshot = recording_.snapshot_since_last(WhenBuilding::kQueue);
  if (!snapshot.ok()) return to_grpc_status(snapshot.status());
  if (!response->mutable_xspace()->ParseFromString(snapshot->xspace)) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "the flight recorder's snapshot did not parse");
  }
  response->set_empty_trace(!xspace::has_events(response->xspace()));
  return grpc::Status::OK;
}

grpc::Status ProfilerServiceImpl::StopContinuousProfiling(grpc::ServerContext* context,
                                                          const tensorflow::StopContinuousProfilingRequest*,
                                                          tensorflow::StopContinuousProfilingResponse*) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "StopContinuousProfiling"); !allowed.ok()) return allowed;
  return to_grpc_status(recording_.stop());
}

}  // namespace podscope::agent
