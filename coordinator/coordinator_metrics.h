// podscope-coordinator's Prometheus metrics: workers up/down, clock offset and RTT per worker, captures by
// outcome. Updated when the registry's clocks are measured and when a capture ends; a scrape only serializes.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "daemon/atomic_file.h"
#include "podscope/v1/coordinator.pb.h"

namespace podscope::coordinator {

class CoordinatorMetrics {
 public:
  CoordinatorMetrics();
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  void update_workers(const std::vector<podscope::v1::WorkerInfo>& workers);
  // exit_code as pod_capture::CaptureResult::exit_code(): 0 complete, 3 partial, 1 failed.
  void count_capture(int exit_code);
  // A Register the coordinator refused: "not_allowed" (a caller outside allowed_clients), "invalid" (no host name,
  // not one address, names that are no clean text), "address_taken" (the name is another identity's, or it would
  // move a static worker or another agent's live one), "registry_full" (max_workers, none stale), "unverified" (the
  // agent at the address did not answer as the registered name and instance), "too_many" (its source has as many
  // registrations being verified, or failed, as RegistrationCheck allows).
  void count_refused_registration(const std::string& reason);
  // A trigger report that got no pod snapshot of its own because of a bound: "rate_limited"
  // (pod_snapshot_min_interval_ms) or "disk_cap" (pod_snapshot_max_mb).
  void count_skipped_pod_snapshot(const std::string& reason);
  // Temporary files of writes a crash or kill cut off, removed at start (logged when there were any).
  void count_swept(const SweptWrites& swept);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& workers_;
  prometheus::Family<prometheus::Gauge>& worker_up_;
  prometheus::Family<prometheus::Gauge>& clock_offset_;
  prometheus::Family<prometheus::Gauge>& clock_rtt_;
  prometheus::Family<prometheus::Counter>& captures_;
  prometheus::Family<prometheus::Counter>& refused_registrations_;
  prometheus::Family<prometheus::Counter>& skipped_pod_snapshots_;
  prometheus::Counter& interrupted_writes_removed_;
  prometheus::Counter& interrupted_writes_removed_bytes_;
  std::vector<std::map<std::string, std::string>> worker_labels_;  // of the workers the last update showed
};

}  // namespace podscope::coordinator
