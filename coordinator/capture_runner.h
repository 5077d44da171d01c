// The coordinator's pod runs, one at a time: Capture, NewSession and triggered pod snapshots all go through it.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/worker_registry.h"
#include "daemon/clock.h"
#include "pod_capture/cancellation.h"
#include "pod_capture/pod_run.h"
#include "run_directory/run_directory.h"

namespace podscope::coordinator {

// Serializes pod runs: agents run one capture at a time, so overlapping pod captures would only fail.
class CaptureRunner {
 public:
  CaptureRunner(WorkerRegistry& registry, CoordinatorMetrics& metrics, const Clock& clock)
      : registry_(registry), metrics_(metrics), clock_(clock) {}
  // A pod run (pod_capture::run_pod) of the named workers into `run_dir`, with what the registry knows of them.
  // ALREADY_EXISTS when another run is in progress.
  absl::StatusOr<pod_capture::PodRunOutcome> run(const std::vector<std::string>& host_names,
                                                 const pod_capture::CaptureSpec& spec,
                                                 const run_directory::RunDirectory& run_dir,
                                                 const pod_capture::ProgressFn& progress);
  // Ends the running pod run at once (its calls are cancelled; it answers CANCELLED) and refuses new ones: the
  // coordinator stops.
  void stop() { stopping_.cancel(); }

 private:
  WorkerRegistry& registry_;
  CoordinatorMetrics& metrics_;
  const Clock& clock_;
  std::mutex running_;
  pod_capture::Cancellation stopping_;
};

}  // namespace podscope::coordinator
