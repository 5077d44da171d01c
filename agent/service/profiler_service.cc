#include "agent/service/profiler_service.h"

#include "daemon/grpc_status.h"
#include "daemon/log.h"
#include "podscope/v1/profile_answer.pb.h"

namespace podscope::agent {

ProfilerServiceImpl::ProfilerServiceImpl(CaptureSessions& captures, MonitorReporter monitor, RequestMetrics& metrics,
                                         int64_t max_concurrent_monitors, FlightRecorder& recorder,
                                         tls::CallAuthorizer& authorizer)
    : captures_(captures),
      monitor_(std::move(monitor)),
      metrics_(metrics),
      max_concurrent_monitors_(max_concurrent_monitors),
      recorder_(recorder),
      authorizer_(authorizer),
      answer_threads_(kMaxAnswerThreads, metrics.answers_refused) {}

grpc::ServerUnaryReactor* ProfilerServiceImpl::Profile(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  tensorflow::ProfileRequest parsed;
  grpc::Status ready = authorizer_.authorize(*context, "Profile");
  if (ready.ok()) ready = parse_request(*request, parsed);
  return answer_threads_.run(context, ready, [this, context, response, parsed = std::move(parsed)] {
    return run_profile(*context, parsed, *response);
  });
}

grpc::Status ProfilerServiceImpl::run_profile(grpc::CallbackServerContext& context,
                                              const tensorflow::ProfileRequest& request, grpc::ByteBuffer& response) {
  absl::StatusOr<CapturedSession> result = captures_.run(request, [&context] { return context.IsCancelled(); });
  if (!result.ok()) {
    PODSCOPE_LOG(kWarning) << "Profile refused: " << result.status().message();
    metrics_.captures_refused.Increment();
    return to_grpc_status(result.status());
  }
  if (!result->write_error.ok()) {
    metrics_.captures_refused.Increment();
    return to_grpc_status(result->write_error);
  }
  metrics_.captures_served.Increment();
  tensorflow::ProfileResponse fields;
  fields.set_empty_trace(result->empty_trace);
  std::string head = fields.SerializeAsString();
  std::string body;
  // As TensorFlow's server: the XSpace asked for in the response goes there (and to no file); otherwise it is in
  // the file and the response holds nothing more. A capture that could not be written comes back as tool_data
  // `xplane.pb`, which TensorFlow's client saves as <host>.xplane.pb on its side.
  if (!writes_capture_file(request)) {
    append_field_prefix(tensorflow::ProfileResponse::kXspaceFieldNumber, result->xspace.size(), head);
    body = std::move(result->xspace);
  } else if (result->written_path.empty()) {
    tensorflow::ProfileToolData tool;
    tool.set_name("xplane.pb");
    std::string tool_head = tool.SerializeAsString();
    append_field_prefix(tensorflow::ProfileToolData::kDataFieldNumber, result->xspace.size(), tool_head);
    append_field_prefix(tensorflow::ProfileResponse::kToolDataFieldNumber, tool_head.size() + result->xspace.size(),
                        head);
    head += tool_head;
    body = std::move(result->xspace);
  } else if (!result->written_summary.empty()) {
    // Written into a bucket: podscope's clients read where, and the summary, instead of the capture.
    podscope::v1::SerializedProfileResponse written;
    written.set_written_to(result->written_path);
    written.set_written_summary(std::move(result->written_summary));
    written.set_host_analysis(std::move(result->written_host_analysis));
    head += written.SerializeAsString();
    // The analysis' records (names, packed times) compress several times over: sent gzipped when the client
    // accepts it, as gRPC negotiates.
    context.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  }
  response = raw_answer(std::move(head), std::move(body), metrics_.heap_returned);
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
  return to_grpc_status(recorder_.start(FlightRecorderSettings{window_ms * 1'000'000, continuous_max_bytes_}));
}

grpc::ServerUnaryReactor* ProfilerServiceImpl::GetSnapshot(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer*, grpc::ByteBuffer* response) {
  return answer_threads_.run(context, authorizer_.authorize(*context, "GetSnapshot"),
                             [this, response] { return take_snapshot(*response); });
}

grpc::Status ProfilerServiceImpl::take_snapshot(grpc::ByteBuffer& response) {
  std::string body;
  tensorflow::ProfileResponse fields;
  {
    absl::StatusOr<RecorderSnapshot> snapshot = recorder_.snapshot_since_last(WhenBuilding::kQueue);
    if (!snapshot.ok()) return to_grpc_status(snapshot.status());
    fields.set_empty_trace(!snapshot->has_events);
    body = std::move(snapshot->xspace);
  }
  std::string head = fields.SerializeAsString();
  append_field_prefix(tensorflow::ProfileResponse::kXspaceFieldNumber, body.size(), head);
  response = raw_answer(std::move(head), std::move(body), metrics_.heap_returned);
  return grpc::Status::OK;
}

grpc::Status ProfilerServiceImpl::StopContinuousProfiling(grpc::ServerContext* context,
                                                          const tensorflow::StopContinuousProfilingRequest*,
                                                          tensorflow::StopContinuousProfilingResponse*) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "StopContinuousProfiling"); !allowed.ok()) return allowed;
  return to_grpc_status(recorder_.stop());
}

}  // namespace podscope::agent
