#include "coordinator/capture_runner.h"

#include "daemon/log.h"

namespace podscope::coordinator {

absl::StatusOr<pod_capture::PodRunOutcome> CaptureRunner::run(const std::vector<std::string>& host_names,
                                                              const pod_capture::CaptureSpec& spec,
                                                              const run_directory::RunDirectory& run_dir,
                                                              const pod_capture::ProgressFn& progress) {
  std::unique_lock lock(running_, std::try_to_lock);
  if (!lock.owns_lock()) return absl::AlreadyExistsError("a capture is already running on this coordinator");
  if (stopping_.cancelled()) return absl::UnavailableError("the coordinator is shutting down; no new capture");
  std::vector<std::shared_ptr<pod_capture::AgentConnection>> held;  // alive through the run
  std::vector<pod_capture::PodAgent> agents;
  for (const auto& name : host_names) {
    if (auto connection = registry_.connection(name)) {
      agents.push_back({connection.get(), name, registry_.drift_ppm(name)});
      held.push_back(std::move(connection));
    }
  }
  if (agents.empty()) return absl::FailedPreconditionError("no worker to capture");
  pod_capture::CaptureSpec stoppable = spec;
  stoppable.cancellation = &stopping_;
  auto outcome = pod_capture::run_pod(agents, stoppable, run_dir, clock_, progress);
  if (!outcome.ok()) return outcome;
  metrics_.count_capture(outcome->exit_code());
  PODSCOPE_LOG(kInfo) << "capture " << spec.session_id << " of " << agents.size() << " worker(s): exit code "
                      << outcome->exit_code();
  if (!outcome->analysis_error.empty()) {
    PODSCOPE_LOG(kWarning) << "pod analysis of " << run_dir.location() << " failed: " << outcome->analysis_error;
  }
  return outcome;
}

}  // namespace podscope::coordinator
