#include "agent/service/agent_service.h"

#include <algorithm>

#include "agent/capture/bucket_uploads.h"
#include "daemon/path_within_root.h"
#include "storage/location.h"

#include "daemon/grpc_status.h"
#include "daemon/log.h"

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
                                   std::function<StartLead()> start_lead, std::function<CaptureLimits()> limits,
                                   FlightRecorder& recorder, const TriggeredSnapshots& snapshots,
                                   RequestMetrics& metrics, RepositoryQuota& quota, tls::CallAuthorizer& authorizer)
    : clock_(clock),
      host_name_(std::move(host_name)),
      instance_id_(std::move(instance_id)),
      fill_status_(std::move(fill_status)),
      start_lead_(std::move(start_lead)),
      limits_(std::move(limits)),
      recorder_(recorder),
      snapshots_(snapshots),
      metrics_(metrics),
      quota_(quota),
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
  if (!request->repository_root().empty()) {
    const absl::Status allowed = check_bucket_root(request->repository_root(), limits_());
    if (!allowed.ok()) response->set_repository_refused(std::string(allowed.message()));
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
  return answer_threads_.run(context, ready, [this, context, response, parsed = std::move(parsed)] {
    return answer_window(*context, parsed, *response);
  });
}

grpc::Status AgentServiceImpl::answer_window(grpc::CallbackServerContext& context,
                                             const podscope::v1::RecordedWindowRequest& request,
                                             grpc::ByteBuffer& response) {
  podscope::v1::RecordedWindowResponse fields;
  std::string body;
  const CaptureLimits limits = limits_();
  if (!request.repository_root().empty()) {
    if (absl::Status allowed = check_bucket_root(request.repository_root(), limits); !allowed.ok()) {
      return to_grpc_status(allowed);
    }
    if (!storage::is_bucket_url(request.repository_root()) || !is_plain_path_component(request.session_id())) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "GetRecordedWindow writes into a bucket root (gs://, s3://) under a plain session id");
    }
  }
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
  if (!request.repository_root().empty()) {
    std::string host = request.host_name();
    std::replace(host.begin(), host.end(), ':', '_');
    if (!is_plain_path_component(host)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "host_name '" + host + "' is not a plain file name");
    }
    absl::StatusOr<std::string> uploaded = upload_capture(request.repository_root(), request.session_id(), host, body,
                                                          limits.failed_uploads_directory, quota_);
    if (!uploaded.ok()) return to_grpc_status(uploaded.status());
    fields.set_written_to(*uploaded);
    CaptureDescription description = describe_capture(body, host);
    // The host's database beside its file, as a capture's (CaptureSessions::write_to_repository): a later analysis of
    // the run merges it instead of reading the window back. Without it that analysis reads the file: a warning.
    if (!description.host_analysis.empty()) {
      if (absl::Status s = upload_host_database(*uploaded, body.size(), description.host_analysis); !s.ok()) {
        PODSCOPE_LOG(kWarning) << "the host database of " << *uploaded << " was not written: " << s.message();
      }
    }
    fields.set_written_summary(std::move(description.summary));
    fields.set_host_analysis(std::move(description.host_analysis));
    body = std::string();
    context.set_compression_algorithm(GRPC_COMPRESS_GZIP);  // as Profile's answer of a capture written to a bucket
  }
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
