// One pod run, the same for `podscope capture --service_addr`, podscope-coordinator's Capture and
// TensorBoard's NewSession on the coordinator or an agent: capture (capture.h) → write the run directory
// (run_directory.h) → pod analysis (analysis/runner) → the summary a user reads.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/clock.h"
#include "pod_capture/capture.h"
#include "podscope/v1/coordinator.pb.h"
#include "run_directory/run_directory.h"
#include "tensorflow/profiler_analysis.pb.h"

namespace podscope::pod_capture {

// The one translation of a capture request into a spec, where defaults are applied: a duration <= 0 is
// kDefaultCaptureDurationMs, num_tracing_attempts <= 0 is CaptureSpec's, and an empty `session_id` is
// tf_run_name(now_ns). The request's worker selection is not part of a spec.
CaptureSpec capture_spec_from(const podscope::v1::CaptureRequest& request, const std::string& session_id,
                              int64_t now_ns);

// TensorBoard's worker-list capture (tensorflow.ProfileAnalysis/NewSession) as a spec: one attempt (TensorBoard asks
// again itself), the request's duration, the tracer options only when the client sent them (opts.version >= 1),
// else the spec's own, and the request's session_id (tf_run_name(now_ns) when empty).
CaptureSpec capture_spec_from(const tensorflow::NewProfileSessionRequest& request, int64_t now_ns);

// An agent of the pod and what the caller knows of it beyond its address (the coordinator's registry).
struct PodAgent {
  AgentConnection* connection = nullptr;
  std::string host_name;       // the name the worker registered with: used when its XSpace names no host
  double clock_drift_ppm = 0;  // from a long series of clock measurements; 0 when unknown
};

struct PodRunOutcome {
  CaptureResult capture;
  std::filesystem::path run_dir;  // a local run's directory (empty for a run in a bucket)
  std::string run_location;       // where the run is, local or in a bucket
  // Per host its outcome and clock, the start skew and warnings, then the pod analysis summary (or a warning
  // naming why the analysis failed). It does not name the run directory: a client may keep its copy elsewhere.
  std::string summary_text;
  std::string analysis_error;  // empty when the analysis ran or nothing was captured
  // The analysis outputs could not be written (a full disk): none was kept, the capture's own files were, and the
  // run failed (exit code 1) as when those cannot be written.
  bool analysis_outputs_lost = false;
  int exit_code() const { return analysis_outputs_lost ? 1 : capture.exit_code(); }
};

// Captures the pod, writes the run into `run_dir` (created if missing) and, when any host returned data,
// analyses it there. CANCELLED, with nothing written, when spec.cancellation ended the capture. An analysis that cannot
// read the data leaves the capture standing (a warning); one whose outputs cannot be written removes those it wrote and
// fails the run (analysis_outputs_lost). An error when the capture's own files cannot be written: the run directory is
// removed then, so no run that looks whole but lacks hosts is left behind. NewSession's answer for a pod run:
// empty_trace when no host returned data, and each failed host's address and error in error_message.
void fill_new_session_response(const PodRunOutcome& outcome, tensorflow::NewProfileSessionResponse& response);

// A run in a bucket is written by the agents themselves (CaptureSpec::repository_root): before anything is captured,
// the bucket is checked writable with this process's credentials and every agent is asked whether it would write
// there (its allowed_repository_roots); a refusal fails the run naming the bucket and the agent, and nothing is
// written.
absl::StatusOr<PodRunOutcome> run_pod(const std::vector<PodAgent>& agents, CaptureSpec spec,
                                      const run_directory::RunDirectory& run_dir, const Clock& clock,
                                      const ProgressFn& progress);

}  // namespace podscope::pod_capture
