// Triggered pod snapshots: an agent's report of a slow step (ReportTrigger) becomes one pod run — the one
// pod-run path, pod_capture::run_pod, through the CaptureRunner — of every up worker of the reporting worker's
// job, for the same span of coordinator time: `before_ms` before the slow step's end to `after_ms` after it
// (each agent's span translated to its clock by its measured offset). The run waits for the span's end, so the
// slow step's neighbours are in it too. In synchronous training every rank sees the slow step: reports of the
// same (job, step) within the reporter's cool-down, or of a job whose snapshot is still waiting, join it.
// Whatever a reporter says its cool-down is, a job gets at most one pod snapshot per min_interval_ms, and none
// while the pod snapshots already on disk hold max_bytes; both are counted and the answer says which bound held.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/capture_runner.h"
#include "coordinator/worker_registry.h"
#include "daemon/clock.h"
#include "pod_capture/capture.h"
#include "podscope/v1/coordinator.pb.h"

namespace podscope::coordinator {

struct PodSnapshotSettings {
  std::filesystem::path repository_root;  // empty: no pod snapshot is taken (there is nowhere to keep it)
  int64_t before_ms = 10'000;             // bounded by the reporting agent's flight recorder window
  int64_t after_ms = 2'000;
  int clock_sync_pings = 16;
  int64_t min_interval_ms = 60'000;  // between two pod snapshots of one job
  int64_t max_bytes = 1ll << 30;     // of the pod snapshots kept under repository_root
};

class PodSnapshots {
 public:
  PodSnapshots(WorkerRegistry& registry, CaptureRunner& runner, PodSnapshotSettings settings, const Clock& clock,
               CoordinatorMetrics& metrics);
  ~PodSnapshots();
  void stop();

  // The run name the pod snapshot will be written as; or an empty run name and, in `detail`, why none is taken
  // for this report (it joined another, or the coordinator keeps no runs). INVALID_ARGUMENT for an unknown worker.
  absl::StatusOr<podscope::v1::TriggerReportResponse> report(const podscope::v1::TriggerReport& report);

 private:
  struct Pending {
    std::string job;
    pod_capture::CaptureSpec spec;
  };
  void run();
  void take(Pending pending);
  // Bytes of the pod snapshots under the repository root (runs whose capture.json says triggered_snapshot).
  uint64_t bytes_on_disk() const;

  WorkerRegistry& registry_;
  CaptureRunner& runner_;
  const PodSnapshotSettings settings_;
  const Clock& clock_;
  CoordinatorMetrics& metrics_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::deque<Pending> pending_;
  std::map<std::pair<std::string, int64_t>, int64_t> recent_;  // (job, step) → end of its cool-down, coordinator time
  std::map<std::string, int64_t> last_taken_;                  // job → when its last pod snapshot was asked for
  std::thread worker_;
};

}  // namespace podscope::coordinator
