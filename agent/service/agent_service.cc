#include "agent/service/agent_service.h"

#include "daemon/grpc_status.h"

namespace podscope::agent {

AgentServiceImpl::AgentServiceImpl(const Clock& clock, std::function<void(podscope::v1::AgentStatus&)> fill_status,
                                   std::function<StartLead()> start_lead, FlightRecording& recording,
                                   const TriggeredSnapshots& snapshots, RequestMetrics& metrics,
                                   tls::CallAuthorizer& authorizer)
    : clock_(clock),
      fill_status_(std::move(fill_status)),
      start_lead_(std::move(start_lead)),
      recording_(recording),
      snapshots_(snapshots),
      metrics_(metrics),
      authorizer_(authorizer),
      answer_threads_(kMaxAnswerThreads, metrics.answers_refused) {}

grpc::Status AgentServiceImpl::Ping(grpc::ServerContext*, const podscope::v1::PingRequest* request,
                                    podscope::v1::PingResponse* response) {
  const int64_t received = clock_.now_ns();
  response->set_client_send_ns(request->client_send_ns());
  response->set_server_receive_ns(received);
  const StartLead lead = start_lead_();
  if (lead.ns > 0) {
    response->set_capture_start_lead_ms(lead.ns / 1'000'000);
    response->set_capture_start_lead_reason(lead.reason);
  }
  response->set_server_send_ns(clock_.now_ns());
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::GetStatus(grpc::ServerContext*, const podscope::v1::StatusRequest*,
                                         podscope::v1::AgentStatus* response) {
  fill_status_(*response);
  response->set_now_ns(clock_.now_ns());
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* AgentServiceImpl::GetRecordedWindow(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  podscope::v1::RecordedWindowRequest parsed;
  grpc::Status ready = authorizer_.authorize(*context, "GetRecordedWindow");
  if (ready.ok()) ready = parse_request(*request, parsed);
  return answer_threads_.run(context, ready,
                             [this, response, parsed = std::move(parsed)] { return answer_window(parsed, *response); });
}

grpc::Status AgentServiceImpl::answer_window(const podscope::v1::RecordedWindowRequest& request,
                                             grpc::ByteBuffer& response) {
  podscope::v1::RecordedWindowResponse fields;
  std::string body;
  {
    absl::StatusOr<RecorderSnapshot> snapshot =
        request.end_ns() > 0 ? recording_.span(request.start_ns(), request.end_ns(), WhenBuilding::kQueue)
                             : recording_.last(request.last_ms(), WhenBuilding::kQueue);
    if (!snapshot.ok()) return to_grpc_status(snapshot.status());
    fields.set_start_ns(snapshot->begin_ns);
    fields.set_end_ns(snapshot->end_ns);
    fields.set_whole_since_ns(snapshot->whole_since_ns);
    body = std::move(snapshot->xspace);
  }
  // The build's objects are freed: hand them back now; the answer's bytes go once gRPC has sent them.
  recording_.return_built_memory();
  std::string head = fields.SerializeAsString();
  append_field_prefix(podscope::v1::RecordedWindowResponse::kXspaceFieldNumber, body.size(), head);
  response = raw_answer(std::move(head), std::move(body), metrics_.heap_returned);
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::GetStoredSnapshot(grpc::ServerContext* context,
                                                 const podscope::v1::StoredSnapshotRequest* request,
                                                 podscope::v1::RecordedWindowResponse* response) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "GetStoredSnapshot"); !allowed.ok()) return allowed;
  absl::StatusOr<StoredSnapshotData> stored = snapshots_.get(request->id());
  if (!stored.ok()) return to_grpc_status(stored.status());
  response->set_start_ns(stored->info.start_ns());
  response->set_end_ns(stored->info.end_ns());
  response->set_xspace(std::move(stored->xspace));
  return grpc::Status::OK;
}

}  // namespace podscope::agent
