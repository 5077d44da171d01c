#include "pod_capture/pod_run.h"

#include <algorithm>
#include <chrono>

#include "analysis/runner/analysis_runner.h"
#include "daemon/run_name.h"
#include "pod_capture/capture_files.h"
#include "run_directory/run_file_reader.h"

namespace podscope::pod_capture {
namespace {

std::vector<AgentConnection*> connections_of(const std::vector<PodAgent>& agents) {
  std::vector<AgentConnection*> out;
  out.reserve(agents.size());
  for (const PodAgent& agent : agents) out.push_back(agent.connection);
  return out;
}

// What the caller knows of each agent goes into its host's record before the files are written.
void apply_known_facts(const std::vector<PodAgent>& agents, CaptureResult& result) {
  for (size_t i = 0; i < result.hosts.size() && i < agents.size(); ++i) {
    HostCapture& host = result.hosts[i];
    host.clock_drift_ppm = agents[i].clock_drift_ppm;
    if (!agents[i].host_name.empty() && host.host_name == host.file_stem) host.host_name = agents[i].host_name;
  }
}

// A host file the agent wrote into the bucket, analysed: the agent's own analysis of it when it sent one (its clock
// offset, which only the client measured, set as the run's reader stamps it from capture.json), else the file read
// back from the bucket.
absl::StatusOr<podscope::v1::HostAnalysis> written_host_analysis(const run_directory::RunDirectory& run,
                                                                 const HostCapture& host) {
  podscope::v1::HostAnalysis analysis;
  if (!host.host_analysis.empty() && analysis.ParseFromString(host.host_analysis)) {
    if (!analysis.steps().has_clock_offset_ns())
      analysis.mutable_steps()->set_clock_offset_ns(host.clock.estimate.offset_ns);
    return analysis;
  }
  const std::string name = run_directory::host_file_name(host.file_stem);
  absl::StatusOr<storage::ObjectInfo> object = run.store().stat(run.object_name(name));
  if (!object.ok()) return object.status();
  run_directory::RunFileReader reader;
  return analysis::analyze_host_file({run, name, object->size, object->version}, reader);
}

// The analysis of a run whose agents wrote their host files into the bucket: the merge of the analyses they sent, in
// the run's file order, so that no host's file is read back.
absl::StatusOr<analysis::AnalysisOutcome> analyze_written_hosts(const run_directory::RunDirectory& run,
                                                                const CaptureResult& capture) {
  std::vector<const HostCapture*> hosts;
  for (const HostCapture& host : capture.hosts) {
    if (host.ok) hosts.push_back(&host);
  }
  std::sort(hosts.begin(), hosts.end(), [](const HostCapture* a, const HostCapture* b) {
    return run_directory::host_file_name(a->file_stem) < run_directory::host_file_name(b->file_stem);
  });
  std::vector<podscope::v1::HostAnalysis> analyses;
  std::vector<std::string> bad_files;
  for (const HostCapture* host : hosts) {
    absl::StatusOr<podscope::v1::HostAnalysis> analysis = written_host_analysis(run, *host);
    if (analysis.ok()) {
      analyses.push_back(*std::move(analysis));
    } else {
      bad_files.emplace_back(analysis.status().message());
    }
  }
  return analysis::write_analysis_of_hosts(std::move(analyses), std::move(bad_files), run, {});
}

// Runs the pod analysis over a run with data (its files land beside the host files), records how long it took in
// capture.json and adds its summary.
void analyze(const run_directory::RunDirectory& run, PodRunOutcome& outcome) {
  if (outcome.capture.exit_code() == 1) return;
  const auto start = std::chrono::steady_clock::now();
  analysis::AnalysisOptions options;
  options.jobs = analysis::default_analysis_jobs();
  auto analysis =
      run.in_bucket() ? analyze_written_hosts(run, outcome.capture) : analysis::analyze_run_directory(run, options);
  outcome.capture.analyzed_in_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  if (absl::Status s = run.write(run_directory::kCaptureRecordName, capture_json(outcome.capture), Durability::kSynced);
      !s.ok()) {
    outcome.summary_text += "Warning: capture.json without the analysis time: " + std::string(s.message()) + "\n";
  }
  if (!analysis.ok()) {
    outcome.analysis_error = std::string(analysis.status().message());
    outcome.analysis_outputs_lost = analysis.status().code() == absl::StatusCode::kAborted;
    outcome.summary_text += std::string(outcome.analysis_outputs_lost ? "Error" : "Warning") +
                            ": pod analysis failed: " + outcome.analysis_error + "\n";
    return;
  }
  outcome.summary_text += "\n" + analysis->summary_text + analysis->recommendation_text;
  if (run.in_bucket()) {
    // The merged traces would take every host's bytes through this process: they are made where a user asks.
    outcome.summary_text += "The pod traces (pod.trace.json.gz, pod.perfetto-trace): podscope analyze " +
                            run.location() +
                            " writes them (up to --trace-max-hosts hosts), reading the hosts' "
                            "files from the bucket.\n";
  }
}

// Asks every agent whether it would write into `repository_root` (PingRequest.repository_root): the first refusal,
// naming the agent; agents that do not answer are left to the capture, which names them.
absl::Status agents_accept(const std::vector<PodAgent>& agents, const std::string& repository_root) {
  for (const PodAgent& agent : agents) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    podscope::v1::PingRequest request;
    request.set_repository_root(repository_root);
    podscope::v1::PingResponse response;
    if (!agent.connection->agent->Ping(&context, request, &response).ok()) continue;
    if (!response.repository_refused().empty()) {
      return absl::PermissionDeniedError("agent " + agent.connection->address + " refuses to write into " +
                                         repository_root + ": " + response.repository_refused() +
                                         "; nothing was captured");
    }
  }
  return absl::OkStatus();
}

}  // namespace

CaptureSpec capture_spec_from(const podscope::v1::CaptureRequest& request, const std::string& session_id,
                              int64_t now_ns) {
  CaptureSpec spec;
  if (request.duration_ms() > 0) spec.duration_ms = static_cast<int64_t>(request.duration_ms());
  if (request.num_tracing_attempts() > 0) spec.num_tracing_attempts = request.num_tracing_attempts();
  spec.delay_ms = static_cast<int64_t>(request.delay_ms());
  spec.include_dataset_ops = request.include_dataset_ops();
  spec.host_tracer_level = request.host_tracer_level();
  spec.device_tracer_level = request.device_tracer_level();
  spec.python_tracer_level = request.python_tracer_level();
  spec.session_id = session_id.empty() ? tf_run_name(now_ns) : session_id;
  if (request.last_ms() > 0) {
    spec.last_ms = static_cast<int64_t>(request.last_ms());
    spec.duration_ms = spec.last_ms;
    spec.num_tracing_attempts = 1;
  }
  return spec;
}

CaptureSpec capture_spec_from(const tensorflow::NewProfileSessionRequest& request, int64_t now_ns) {
  const tensorflow::ProfileRequest& profile = request.request();
  podscope::v1::CaptureRequest capture;
  capture.set_duration_ms(profile.duration_ms());
  capture.set_num_tracing_attempts(1);
  const CaptureSpec defaults;
  const tensorflow::ProfileOptions& opts = profile.opts();
  const bool has_options = opts.version() > 0;
  capture.set_include_dataset_ops(has_options ? opts.include_dataset_ops() : defaults.include_dataset_ops);
  capture.set_host_tracer_level(has_options ? opts.host_tracer_level() : defaults.host_tracer_level);
  capture.set_device_tracer_level(has_options ? opts.device_tracer_level() : defaults.device_tracer_level);
  capture.set_python_tracer_level(has_options ? opts.python_tracer_level() : defaults.python_tracer_level);
  return capture_spec_from(capture, request.session_id(), now_ns);
}

void fill_new_session_response(const PodRunOutcome& outcome, tensorflow::NewProfileSessionResponse& response) {
  response.set_empty_trace(outcome.capture.exit_code() == 1);
  if (outcome.analysis_outputs_lost)
    response.set_error_message("pod analysis failed: " + outcome.analysis_error + "\n");
  if (outcome.capture.exit_code() == 0) return;
  std::string errors = response.error_message();
  for (const HostCapture& host : outcome.capture.hosts) {
    if (!host.ok) errors += host.address + ": " + host.error + "\n";
  }
  response.set_error_message(errors);
}

absl::StatusOr<PodRunOutcome> run_pod(const std::vector<PodAgent>& agents, CaptureSpec spec,
                                      const run_directory::RunDirectory& run_dir, const Clock& clock,
                                      const ProgressFn& progress) {
  PodRunOutcome outcome;
  // Claimed before the capture: an unwritable logdir is found before anyone waits for a capture, and a run of the
  // same name (the same second, a reused session id) gets a suffix instead of being overwritten.
  if (run_dir.in_bucket()) {
    if (absl::Status s = run_dir.store().check_writable(); !s.ok()) return s;
    if (absl::Status s = agents_accept(agents, run_dir.store().root().url()); !s.ok()) return s;
  }
  absl::StatusOr<run_directory::RunDirectory> run = run_dir.claim();
  if (!run.ok()) return run.status();
  outcome.run_dir = run->local_path();
  outcome.run_location = run->location();
  if (run->in_bucket()) {
    spec.repository_root = run->store().root().url();
    spec.session_id = run->name();
  }
  outcome.capture = run_capture(connections_of(agents), spec, clock, progress);
  if (spec.cancellation != nullptr && spec.cancellation->cancelled()) {
    std::error_code ignored;
    std::filesystem::remove_all(outcome.run_dir, ignored);
    return absl::CancelledError("the pod run was stopped: its daemon is shutting down; nothing was written");
  }
  apply_known_facts(agents, outcome.capture);
  if (auto written = write_run_files(*run, outcome.capture); !written.ok()) {
    // In a bucket the host files are the agents' and stay (TensorBoard reads them without the rest).
    if (run->in_bucket()) {
      return absl::Status(written.code(), capture_summary_text(outcome.capture, {}) + std::string(written.message()) +
                                              " (the hosts' files in " + run->location() + " were kept)");
    }
    run->remove_all();
    return absl::Status(written.code(), std::string(written.message()) + " (the run directory " + run->location() +
                                            " was removed: it would lack files)");
  }
  outcome.summary_text = capture_summary_text(outcome.capture, {});
  analyze(*run, outcome);
  return outcome;
}

}  // namespace podscope::pod_capture
