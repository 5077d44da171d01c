#include "agent/service/agent_service.h"

#include "daemon/grpc_status.h"

namespace podscope::agent {
namespace {

// Every byte compared whatever the first difference: the time of an answer says nothing of how much of a guess was
// right.
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

}  // namespace

AgentServiceImpl::AgentServiceImpl(const Clock& clock, std::string host_name, std::string instance_id,
                                   std::function<void(podscope::v1::AgentStatus&)> fill_status,
                                   std::function<StartLead()> start_lead, FlightRecorder& recorder,
                                   const TriggeredSnapshots& snapshots, RequestMetrics& metrics,
                                   tls::CallAuthorizer& authorizer)
    : clock_(clock),
      host_name_(std::move(host_name)),
      instance_id_(std::move(instance_id)),
      fill_status_(std::move(fill_status)),
      start_lead_(std::move(start_lead)),
      recorder_(recorder),
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
  response->set_host_name(host_name_);
  if (!request->instance_id().empty()) {
    // Compared in constant time: the answer tells whether a guess is right, never how much of it.
    response->set_instance_matches(same_secret(request->instance_id(), instance_id_));
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
        request.end_ns() > 0 ? recorder_.span(request.start_ns(), request.end_ns(), WhenBuilding::kQueue)
                             : recorder_.last(request.last_ms(), WhenBuilding::kQueue);
    if (!snapshot.ok()) return to_grpc_status(snapshot.status());
    fields.set_start_ns(snapshot->begin_ns);
    fields.set_end_ns(snapshot->end_ns);
    fields.set_whole_since_ns(snapshot->whole_since_ns);
    body = std::move(snapshot->xspace);
  }
  // The build's objects are freed: hand them back now; the answer's bytes go once gRPC has sent them.
  recorder_.return_built_memory();
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
