#include "coordinator/coordinator_service.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>

#include "absl/strings/str_join.h"
#include "daemon/grpc_status.h"
#include "daemon/log.h"
#include "daemon/path_within_root.h"
#include "coordinator/pod_snapshots.h"
#include "run_directory/run_directory.h"
#include "storage/location.h"
#include "proto/xspace/utf8.h"
#include "tls/peer_identity.h"

namespace podscope::coordinator {
namespace {

constexpr size_t kFileChunkBytes = 1 << 20;

grpc::Status invalid(const std::string& reason) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, reason); }

// What an agent registers reaches Prometheus labels, ListWorkers' proto fields and log lines: valid UTF-8 without
// control characters, and a host name of at most 255 bytes.
bool is_clean_text(const std::string& text) {
  return xspace::valid_utf8(text) == text && std::none_of(text.begin(), text.end(), [](char c) {
           return static_cast<unsigned char>(c) < 0x20 || c == 0x7F;
         });
}
bool is_clean_registration(const podscope::v1::RegisterRequest& request) {
  if (request.host_name().size() > 255 || !is_clean_text(request.host_name()) || !is_clean_text(request.job())) {
    return false;
  }
  return std::all_of(request.labels().begin(), request.labels().end(),
                     [](const auto& label) { return is_clean_text(label.first) && is_clean_text(label.second); });
}

// The caller's network address without its port ("10.0.0.5", "::1"): where a registration comes from.
std::string source_address(const grpc::ServerContextBase& context) {
  // gRPC names a peer "ipv4:10.0.0.5:41234", "ipv6:[::1]:41234" or "unix:...".
  std::string peer = context.peer();
  if (!peer.starts_with("ipv")) return peer;
  peer.erase(0, peer.find(':') + 1);
  peer.resize(peer.rfind(':'));
  if (peer.starts_with('[') && peer.ends_with(']')) peer = peer.substr(1, peer.size() - 2);
  return peer;
}

// The workers a capture goes to: those up, and those down but selected, which are tried with the rest (an agent
// that is back answers; one that is not is named in the outcome, exit code 3) rather than failing the capture
// or being left out unnamed.
std::vector<std::string> workers_to_capture(const WorkerRegistry::Selection& selection) {
  std::vector<std::string> out = selection.host_names;
  out.insert(out.end(), selection.down.begin(), selection.down.end());
  return out;
}

// Streams one file in chunks of kFileChunkBytes.
bool stream_file(const std::filesystem::path& path, const std::string& relative,
                 grpc::ServerWriter<podscope::v1::CaptureChunk>* writer) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::string buffer(kFileChunkBytes, '\0');
  uint64_t offset = 0;
  while (true) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = static_cast<size_t>(in.gcount());
    podscope::v1::CaptureChunk chunk;
    auto* file = chunk.mutable_file();
    file->set_relative_path(relative);
    file->set_offset(offset);
    file->set_data(buffer.data(), n);
    file->set_last(!in);
    offset += n;
    if (!writer->Write(chunk)) return false;
    if (!in) return true;
  }
}

// Kept under the repository root when there is one; otherwise staged in a temp directory for the stream.
std::filesystem::path capture_run_directory(const CoordinatorSettings& settings, const std::string& run_name) {
  if (!settings.repository_root.empty())
    return run_directory::RunDirectory::in_logdir(settings.repository_root, run_name).local_path();
  return std::filesystem::temp_directory_path() / ("podscope-coordinator-" + std::to_string(getpid()) + "-" + run_name);
}

// The run `run_name` of a client's bucket logdir, written with the coordinator's credentials.
absl::StatusOr<run_directory::RunDirectory> bucket_run(const std::string& logdir, const std::string& run_name) {
  if (!storage::is_bucket_url(logdir)) {
    return absl::InvalidArgumentError("logdir " + logdir + " is no bucket (gs://, s3://): a local run is streamed");
  }
  std::string root = logdir;
  while (root.ends_with('/')) root.pop_back();
  return run_directory::RunDirectory::open(root + "/plugins/profile/" + run_name);
}

// The run as the stream carries it: the summary (for the run name), every file, the summary with the outcome.
// False when the client went away.
bool stream_run(const pod_capture::PodRunOutcome& outcome, grpc::ServerWriter<podscope::v1::CaptureChunk>* writer) {
  podscope::v1::CaptureChunk summary;
  summary.mutable_summary()->set_run_name(outcome.run_location.substr(outcome.run_location.rfind('/') + 1));
  summary.mutable_summary()->set_exit_code(outcome.exit_code());
  writer->Write(summary);
  bool streamed = true;
  // A run in a bucket is the client's to read there.
  for (const auto& entry : outcome.run_dir.empty() ? std::filesystem::directory_iterator()
                                                   : std::filesystem::directory_iterator(outcome.run_dir)) {
    if (!entry.is_regular_file()) continue;
    streamed = streamed && stream_file(entry.path(), entry.path().filename().string(), writer);
  }
  summary.mutable_summary()->set_text(outcome.summary_text);
  writer->Write(summary);
  return streamed;
}

}  // namespace

absl::StatusOr<std::filesystem::path> confine_to_root(const std::filesystem::path& root, const std::string& requested) {
  return podscope::confine_to_root(root, requested,
                                   {.no_root = "the coordinator has no repository_root configured: it writes no files",
                                    .outside_code = absl::StatusCode::kInvalidArgument,
                                    .outside_prefix = "repository_root is outside the coordinator's root: "});
}

grpc::Status CoordinatorService::Register(grpc::ServerContext* context, const podscope::v1::RegisterRequest* request,
                                          podscope::v1::RegisterResponse* response) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "Register"); !allowed.ok()) {
    metrics_.count_refused_registration("not_allowed");
    return allowed;
  }
  if (request->host_name().empty()) {
    metrics_.count_refused_registration("invalid");
    return invalid("Register: host_name is empty");
  }
  if (!is_clean_registration(*request)) {
    metrics_.count_refused_registration("invalid");
    return invalid(
        "Register: host_name, job and labels must be UTF-8 text without control characters (host_name at "
        "most 255 bytes)");
  }
  if (auto parsed = pod_capture::parse_service_addresses(request->address()); !parsed.ok() || parsed->size() != 1) {
    metrics_.count_refused_registration("invalid");
    return invalid("Register: address \"" + request->address() + "\" is not one host:port");
  }
  if (request->instance_id().empty()) {
    metrics_.count_refused_registration("invalid");
    return invalid("Register: instance_id is empty (an agent sends the random id it chose when it started)");
  }
  const std::string owner = authorizer_.owner_of(*context);
  if (absl::Status s = registry_.ownership_refusal(*request, owner, clock_.now_ns()); !s.ok()) {
    PODSCOPE_LOG(kWarning) << "registration refused: " << s.message();
    metrics_.count_refused_registration("address_taken");
    return to_grpc_status(s);
  }
  if (absl::Status s = check_.check(*request, source_address(*context), clock_.now_ns()); !s.ok()) {
    PODSCOPE_LOG(kWarning) << "registration refused: " << s.message();
    metrics_.count_refused_registration(absl::IsResourceExhausted(s) ? "too_many" : "unverified");
    return to_grpc_status(s);
  }
  if (absl::Status s = registry_.register_worker(*request, owner, clock_.now_ns()); !s.ok()) {
    PODSCOPE_LOG(kWarning) << "registration refused: " << s.message();
    metrics_.count_refused_registration(absl::IsResourceExhausted(s) ? "registry_full" : "address_taken");
    return to_grpc_status(s);
  }
  PODSCOPE_LOG(kInfo) << "worker " << request->host_name() << " registered at " << request->address() << " by "
                      << owner;
  response->set_heartbeat_interval_ms(settings_.heartbeat_interval_ms);
  if (on_register_) on_register_();
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext* context, const podscope::v1::HeartbeatRequest* request,
                                           podscope::v1::HeartbeatResponse* response) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "Heartbeat", tls::CallAuthorizer::Audit::kQuiet);
      !allowed.ok()) {
    return allowed;
  }
  response->set_known(
      registry_.heartbeat(request->host_name(), request->address(), authorizer_.owner_of(*context), clock_.now_ns()));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ListWorkers(grpc::ServerContext* context, const podscope::v1::ListWorkersRequest*,
                                             podscope::v1::ListWorkersResponse* response) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "ListWorkers", tls::CallAuthorizer::Audit::kQuiet);
      !allowed.ok()) {
    return allowed;
  }
  for (auto& worker : registry_.list(clock_.now_ns())) *response->add_workers() = std::move(worker);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ForgetWorker(grpc::ServerContext* context,
                                              const podscope::v1::ForgetWorkerRequest* request,
                                              podscope::v1::ForgetWorkerResponse* response) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "ForgetWorker"); !allowed.ok()) return allowed;
  const std::optional<std::string> owner = registry_.owner(request->host_name());
  const std::string caller = authorizer_.owner_of(*context);
  // Without TLS an address is no proof of who registered (every process of a host shares it): only the operator's.
  const bool owns = settings_.tls_on && owner == caller;
  if (owner && !owns && !is_registry_admin(*context)) {
    PODSCOPE_LOG(kWarning) << "refused ForgetWorker of " << request->host_name() << " from " << caller << " ("
                           << context->peer() << "): not its owner nor in registry_admins";
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "ForgetWorker: worker \"" + request->host_name() + "\" was registered by " + *owner + "; " +
                            caller + " may not forget it (only " + (settings_.tls_on ? "that identity or " : "") +
                            "one in the coordinator's registry_admins)");
  }
  if (!registry_.forget(request->host_name())) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "ForgetWorker: no registered worker \"" + request->host_name() + "\" (static workers stay)");
  }
  PODSCOPE_LOG(kInfo) << "worker " << request->host_name() << " forgotten: its name, registered by "
                      << owner.value_or("nobody") << ", is free";
  response->set_owner(owner.value_or(""));
  return grpc::Status::OK;
}

bool CoordinatorService::is_registry_admin(const grpc::ServerContext& context) const {
  if (!settings_.tls_on) {
    const std::string caller = source_address(context);
    return std::find(settings_.registry_admins.begin(), settings_.registry_admins.end(), caller) !=
           settings_.registry_admins.end();
  }
  const tls::PeerCertificate peer = tls::peer_certificate(context);
  if (!peer.over_tls) return false;
  for (const std::string& name : tls::certificate_names(peer)) {
    if (std::find(settings_.registry_admins.begin(), settings_.registry_admins.end(), name) !=
        settings_.registry_admins.end()) {
      return true;
    }
  }
  return false;
}

grpc::Status CoordinatorService::Capture(grpc::ServerContext* context, const podscope::v1::CaptureRequest* request,
                                         grpc::ServerWriter<podscope::v1::CaptureChunk>* writer) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "Capture"); !allowed.ok()) return allowed;
  if (request->num_tracing_attempts() < 0) {
    return invalid("num_tracing_attempts must be >= 1, got " + std::to_string(request->num_tracing_attempts()));
  }
  WorkerSelector selector;
  selector.hosts.assign(request->hosts().begin(), request->hosts().end());
  selector.jobs.assign(request->jobs().begin(), request->jobs().end());
  for (const auto& [k, v] : request->labels()) selector.labels[k] = v;
  const auto selection = registry_.select(selector, clock_.now_ns());
  if (!selection.unknown.empty()) return invalid("unknown worker(s): " + absl::StrJoin(selection.unknown, ", "));
  if (selection.host_names.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "no worker is up (or matches the selection)" +
                            (selection.down.empty() ? "" : "; down: " + absl::StrJoin(selection.down, ", ")));
  }
  auto progress = [writer](const std::string& line) {
    podscope::v1::CaptureChunk chunk;
    chunk.set_progress(line);
    writer->Write(chunk);
  };
  if (!selection.down.empty()) progress("Down, tried with the rest: " + absl::StrJoin(selection.down, ", "));
  pod_capture::CaptureSpec spec = pod_capture::capture_spec_from(*request, /*session_id=*/"", clock_.now_ns());
  spec.clock_sync_pings = settings_.clock_sync_pings;
  absl::StatusOr<run_directory::RunDirectory> run_dir =
      request->logdir().empty()
          ? absl::StatusOr<run_directory::RunDirectory>(capture_run_directory(settings_, spec.session_id))
          : bucket_run(request->logdir(), spec.session_id);
  if (!run_dir.ok()) return to_grpc_status(run_dir.status());
  auto outcome = runner_.run(workers_to_capture(selection), spec, *run_dir, progress);
  if (!outcome.ok()) return to_grpc_status(outcome.status());
  const bool streamed = stream_run(*outcome, writer);
  if (settings_.repository_root.empty() && !outcome->run_dir.empty()) std::filesystem::remove_all(outcome->run_dir);
  if (!streamed) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the client went away during the transfer");
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ReportTrigger(grpc::ServerContext* context, const podscope::v1::TriggerReport* request,
                                               podscope::v1::TriggerReportResponse* response) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "ReportTrigger"); !allowed.ok()) return allowed;
  // A report speaks for the worker it names: only the caller that registered that worker may make it.
  const std::string caller = authorizer_.owner_of(*context);
  const std::optional<std::string> owner = registry_.owner(request->host_name());
  if (!owner || *owner != caller) {
    const std::string by = owner ? "registered by " + *owner : "registered by no agent";
    PODSCOPE_LOG(kWarning) << "refused ReportTrigger for worker " << request->host_name() << " from " << caller
                           << ": it is " << by;
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "ReportTrigger: worker \"" + request->host_name() + "\" is " + by + ", not by " + caller);
  }
  auto answer = pod_snapshots_.report(*request);
  if (!answer.ok()) return to_grpc_status(answer.status());
  *response = std::move(*answer);
  return grpc::Status::OK;
}

grpc::Status ProfileAnalysisService::NewSession(grpc::ServerContext* context,
                                                const tensorflow::NewProfileSessionRequest* request,
                                                tensorflow::NewProfileSessionResponse* response) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "NewSession"); !allowed.ok()) return allowed;
  if (request->hosts().empty()) return invalid("NewSession: hosts is empty");
  pod_capture::CaptureSpec spec = pod_capture::capture_spec_from(*request, clock_.now_ns());
  spec.clock_sync_pings = settings_.clock_sync_pings;
  if (!is_plain_path_component(spec.session_id)) {
    return invalid("NewSession: session_id \"" + spec.session_id + "\" is not a plain name");
  }
  auto repository = confine_to_root(settings_.repository_root, request->repository_root());
  if (!repository.ok()) return to_grpc_status(repository.status());

  WorkerSelector selector;
  selector.hosts.assign(request->hosts().begin(), request->hosts().end());
  const auto selection = registry_.select(selector, clock_.now_ns());
  if (!selection.unknown.empty())
    return invalid("NewSession: unknown host(s): " + absl::StrJoin(selection.unknown, ", "));
  auto outcome =
      runner_.run(workers_to_capture(selection), spec, *repository / spec.session_id, [](const std::string&) {});
  if (!outcome.ok()) return to_grpc_status(outcome.status());
  pod_capture::fill_new_session_response(*outcome, *response);
  return grpc::Status::OK;
}

}  // namespace podscope::coordinator
