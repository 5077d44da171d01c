#include "coordinator/coordinator_service.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "analysis/runner/analysis_runner.h"
#include "pod_capture/run_directory.h"
#include "daemon/log.h"
#include "daemon/path_within_root.h"

namespace podscope::coordinator {
namespace {

constexpr size_t kFileChunkBytes = 1 << 20;

grpc::Status invalid(const std::string& reason) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, reason); }

grpc::Status to_grpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

bool is_plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
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

pod_capture::CaptureSpec spec_from(const podscope::v1::CaptureRequest& request, const CoordinatorSettings& settings) {
  pod_capture::CaptureSpec spec;
  spec.duration_ms = request.duration_ms() > 0 ? static_cast<int64_t>(request.duration_ms()) : 1000;
  spec.num_tracing_attempts = request.num_tracing_attempts() > 0 ? request.num_tracing_attempts() : 3;
  spec.delay_ms = static_cast<int64_t>(request.delay_ms());
  spec.include_dataset_ops = request.include_dataset_ops();
  spec.host_tracer_level = request.host_tracer_level();
  spec.device_tracer_level = request.device_tracer_level();
  spec.python_tracer_level = request.python_tracer_level();
  spec.clock_sync_pings = settings.clock_sync_pings;
  return spec;
}

// Runs the pod analysis over a run that has data (its files land beside the host files); returns the text
// to show, or a warning line when the analysis failed (the capture itself stands).
std::string analyze_if_captured(const std::filesystem::path& run_dir, const pod_capture::CaptureResult& result) {
  if (result.exit_code() == 1) return "";
  auto outcome = analysis::analyze_run_directory(run_dir);
  if (!outcome.ok()) {
    PODSCOPE_LOG(kWarning) << "pod analysis of " << run_dir.string() << " failed: " << outcome.status().message();
    return "Warning: pod analysis failed: " + std::string(outcome.status().message()) + "\n";
  }
  return "\n" + outcome->summary_text;
}

}  // namespace

absl::StatusOr<std::filesystem::path> confine_to_root(const std::filesystem::path& root, const std::string& requested) {
  if (root.empty()) {
    return absl::FailedPreconditionError("the coordinator has no repository_root configured: it writes no files");
  }
  absl::StatusOr<std::filesystem::path> path = resolve_within_root(root, requested);
  if (path.status().code() == absl::StatusCode::kPermissionDenied) {
    return absl::InvalidArgumentError("repository_root is outside the coordinator's root: " +
                                      std::string(path.status().message()));
  }
  return path;
}

absl::StatusOr<pod_capture::CaptureResult> CaptureRunner::capture(const std::vector<std::string>& host_names, pod_capture::CaptureSpec spec,
                                                     const pod_capture::ProgressFn& progress) {
  std::unique_lock lock(running_, std::try_to_lock);
  if (!lock.owns_lock()) return absl::AlreadyExistsError("a capture is already running on this coordinator");
  std::vector<pod_capture::AgentConnection*> agents;
  for (const auto& name : host_names) {
    if (auto* connection = registry_.connection(name)) agents.push_back(connection);
  }
  if (agents.empty()) return absl::FailedPreconditionError("no worker to capture");
  pod_capture::CaptureResult result = pod_capture::run_capture(agents, spec, clock_, progress);
  for (size_t i = 0; i < result.hosts.size() && i < host_names.size(); ++i) {
    result.hosts[i].clock_drift_ppm = registry_.drift_ppm(host_names[i]);
    // The registry knows the worker's name even when its XSpace does not say.
    if (result.hosts[i].host_name == result.hosts[i].file_stem) result.hosts[i].host_name = host_names[i];
  }
  metrics_.count_capture(result.exit_code());
  PODSCOPE_LOG(kInfo) << "capture " << result.session_id << " of " << agents.size() << " worker(s): exit code "
                      << result.exit_code();
  return result;
}

grpc::Status CoordinatorService::Register(grpc::ServerContext*, const podscope::v1::RegisterRequest* request,
                                          podscope::v1::RegisterResponse* response) {
  if (request->host_name().empty()) return invalid("Register: host_name is empty");
  if (auto parsed = pod_capture::parse_service_addresses(request->address()); !parsed.ok() || parsed->size() != 1) {
    return invalid("Register: address \"" + request->address() + "\" is not one host:port");
  }
  if (absl::Status s = registry_.register_worker(*request, clock_.now_ns()); !s.ok()) {
    PODSCOPE_LOG(kWarning) << "registration refused: " << s.message();
    return to_grpc(s);
  }
  PODSCOPE_LOG(kInfo) << "worker " << request->host_name() << " registered at " << request->address();
  response->set_heartbeat_interval_ms(settings_.heartbeat_interval_ms);
  if (on_register_) on_register_();
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext*, const podscope::v1::HeartbeatRequest* request,
                                           podscope::v1::HeartbeatResponse* response) {
  response->set_known(registry_.heartbeat(request->host_name(), request->address(), clock_.now_ns()));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ListWorkers(grpc::ServerContext*, const podscope::v1::ListWorkersRequest*,
                                             podscope::v1::ListWorkersResponse* response) {
  for (auto& worker : registry_.list(clock_.now_ns())) *response->add_workers() = std::move(worker);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Capture(grpc::ServerContext*, const podscope::v1::CaptureRequest* request,
                                         grpc::ServerWriter<podscope::v1::CaptureChunk>* writer) {
  if (request->num_tracing_attempts() < 0) {
    return invalid("num_tracing_attempts must be >= 1, got " + std::to_string(request->num_tracing_attempts()));
  }
  WorkerSelector selector;
  selector.hosts.assign(request->hosts().begin(), request->hosts().end());
  selector.jobs.assign(request->jobs().begin(), request->jobs().end());
  for (const auto& [k, v] : request->labels()) selector.labels[k] = v;
  const auto selection = registry_.select(selector, clock_.now_ns());
  if (!selection.unknown.empty()) {
    std::string names;
    for (const auto& u : selection.unknown) names += (names.empty() ? "" : ", ") + u;
    return invalid("unknown or down worker(s): " + names);
  }
  if (selection.host_names.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no worker is up (or matches the selection)");
  }
  auto progress = [writer](const std::string& line) {
    podscope::v1::CaptureChunk chunk;
    chunk.set_progress(line);
    writer->Write(chunk);
  };
  auto result = runner_.capture(selection.host_names, spec_from(*request, settings_), progress);
  if (!result.ok()) return to_grpc(result.status());

  // Kept under the repository root when there is one; otherwise staged in a temp directory for the stream.
  std::filesystem::path run_dir;
  const bool keep = !settings_.repository_root.empty();
  if (keep) {
    run_dir = pod_capture::run_directory(settings_.repository_root, result->session_id);
  } else {
    run_dir = std::filesystem::temp_directory_path() /
              ("podscope-coordinator-" + std::to_string(getpid()) + "-" + result->session_id);
  }
  if (auto status = pod_capture::write_run_files(run_dir, *result); !status.ok()) return to_grpc(status);
  const std::string analysis_text = analyze_if_captured(run_dir, *result);

  podscope::v1::CaptureChunk summary;
  summary.mutable_summary()->set_run_name(result->session_id);
  summary.mutable_summary()->set_exit_code(result->exit_code());
  writer->Write(summary);
  bool streamed = true;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir)) {
    if (!entry.is_regular_file()) continue;
    streamed = streamed && stream_file(entry.path(), entry.path().filename().string(), writer);
  }
  // The client names its own run directory.
  summary.mutable_summary()->set_text(pod_capture::capture_summary_text(*result, {}) + analysis_text);
  writer->Write(summary);
  if (!keep) std::filesystem::remove_all(run_dir);
  if (!streamed) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the client went away during the transfer");
  return grpc::Status::OK;
}

grpc::Status ProfileAnalysisService::NewSession(grpc::ServerContext*, const tensorflow::NewProfileSessionRequest* request,
                                                tensorflow::NewProfileSessionResponse* response) {
  if (request->hosts().empty()) return invalid("NewSession: hosts is empty");
  std::string session_id = request->session_id();
  if (session_id.empty()) session_id = pod_capture::make_session_id(clock_.now_ns());
  if (!is_plain_name(session_id)) return invalid("NewSession: session_id \"" + session_id + "\" is not a plain name");
  auto repository = confine_to_root(settings_.repository_root, request->repository_root());
  if (!repository.ok()) return to_grpc(repository.status());

  WorkerSelector selector;
  selector.hosts.assign(request->hosts().begin(), request->hosts().end());
  const auto selection = registry_.select(selector, clock_.now_ns());
  if (!selection.unknown.empty()) {
    std::string names;
    for (const auto& u : selection.unknown) names += (names.empty() ? "" : ", ") + u;
    return invalid("NewSession: unknown or down host(s): " + names);
  }
  const auto& profile = request->request();
  pod_capture::CaptureSpec spec;
  spec.duration_ms = profile.duration_ms() > 0 ? static_cast<int64_t>(profile.duration_ms()) : 1000;
  spec.num_tracing_attempts = 1;
  spec.session_id = session_id;
  spec.clock_sync_pings = settings_.clock_sync_pings;
  if (profile.opts().version() > 0) {
    spec.include_dataset_ops = profile.opts().include_dataset_ops();
    spec.host_tracer_level = profile.opts().host_tracer_level();
    spec.device_tracer_level = profile.opts().device_tracer_level();
    spec.python_tracer_level = profile.opts().python_tracer_level();
    spec.delay_ms = 0;
  }
  auto result = runner_.capture(selection.host_names, spec, [](const std::string&) {});
  if (!result.ok()) return to_grpc(result.status());
  if (auto status = pod_capture::write_run_files(*repository / session_id, *result); !status.ok()) return to_grpc(status);
  analyze_if_captured(*repository / session_id, *result);
  response->set_empty_trace(result->exit_code() == 1);
  if (result->exit_code() != 0) {
    std::string errors;
    for (const auto& host : result->hosts) {
      if (!host.ok) errors += host.address + ": " + host.error + "\n";
    }
    response->set_error_message(errors);
  }
  return grpc::Status::OK;
}

}  // namespace podscope::coordinator
