#include "coordinator/coordinator_metrics.h"

#include <algorithm>

#include "daemon/log.h"

namespace podscope::coordinator {

CoordinatorMetrics::CoordinatorMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      workers_(prometheus::BuildGauge()
                   .Name("podscope_coordinator_workers")
                   .Help("Workers known to the coordinator, by state")
                   .Register(*registry_)),
      worker_up_(prometheus::BuildGauge()
                     .Name("podscope_coordinator_worker_up")
                     .Help("1 while the worker heartbeats (or, for a static worker, answers pings)")
                     .Register(*registry_)),
      clock_offset_(prometheus::BuildGauge()
                        .Name("podscope_coordinator_clock_offset_seconds")
                        .Help("Worker clock minus coordinator clock, from the latest ping burst")
                        .Register(*registry_)),
      clock_rtt_(prometheus::BuildGauge()
                     .Name("podscope_coordinator_clock_rtt_seconds")
                     .Help("Smallest ping round trip of the latest burst")
                     .Register(*registry_)),
      captures_(prometheus::BuildCounter()
                    .Name("podscope_coordinator_captures_total")
                    .Help("Captures run by the coordinator, by outcome")
                    .Register(*registry_)),
      refused_registrations_(prometheus::BuildCounter()
                                 .Name("podscope_coordinator_registrations_refused_total")
                                 .Help("Worker registrations the coordinator refused, by reason")
                                 .Register(*registry_)),
      skipped_pod_snapshots_(prometheus::BuildCounter()
                                 .Name("podscope_coordinator_pod_snapshots_skipped_total")
                                 .Help("Trigger reports that got no pod snapshot because of a bound, by reason")
                                 .Register(*registry_)),
      interrupted_writes_removed_(prometheus::BuildCounter()
                                      .Name("podscope_coordinator_interrupted_writes_removed_total")
                                      .Help("Temporary files of atomic writes that a crash or kill cut off, found "
                                            "and removed under repository_root at start")
                                      .Register(*registry_)
                                      .Add({})),
      interrupted_writes_removed_bytes_(prometheus::BuildCounter()
                                            .Name("podscope_coordinator_interrupted_writes_removed_bytes_total")
                                            .Help("Bytes those temporary files held")
                                            .Register(*registry_)
                                            .Add({})) {
  // Present from the first scrape, before the first clock pass counts any worker.
  for (const char* state : {"up", "down"}) workers_.Add({{"state", state}});
  for (const char* outcome : {"complete", "partial", "failed"}) captures_.Add({{"outcome", outcome}});
  for (const char* reason : {"invalid", "not_allowed", "address_taken", "registry_full", "unverified", "too_many"})
    refused_registrations_.Add({{"reason", reason}});
  for (const char* reason : {"rate_limited", "disk_cap"}) skipped_pod_snapshots_.Add({{"reason", reason}});
}

void CoordinatorMetrics::count_skipped_pod_snapshot(const std::string& reason) {
  skipped_pod_snapshots_.Add({{"reason", reason}}).Increment();
}

void CoordinatorMetrics::count_refused_registration(const std::string& reason) {
  refused_registrations_.Add({{"reason", reason}}).Increment();
}

void CoordinatorMetrics::update_workers(const std::vector<podscope::v1::WorkerInfo>& workers) {
  double up = 0, down = 0;
  std::vector<std::map<std::string, std::string>> shown;
  for (const auto& w : workers) {
    (w.up() ? up : down) += 1;
    const std::map<std::string, std::string> labels = {{"host", w.host_name()}, {"address", w.address()}};
    worker_up_.Add(labels).Set(w.up() ? 1 : 0);
    clock_offset_.Add(labels).Set(static_cast<double>(w.clock_offset_ns()) / 1e9);
    clock_rtt_.Add(labels).Set(static_cast<double>(w.clock_rtt_ns()) / 1e9);
    shown.push_back(labels);
  }
  // A worker that left the registry (expired, evicted, forgotten, moved) leaves the metrics too.
  for (const auto& labels : worker_labels_) {
    if (std::find(shown.begin(), shown.end(), labels) != shown.end()) continue;
    for (auto* family : {&worker_up_, &clock_offset_, &clock_rtt_}) family->Remove(&family->Add(labels));
  }
  worker_labels_ = std::move(shown);
  workers_.Add({{"state", "up"}}).Set(up);
  workers_.Add({{"state", "down"}}).Set(down);
}

void CoordinatorMetrics::count_capture(int exit_code) {
  const char* outcome = exit_code == 0 ? "complete" : exit_code == 3 ? "partial" : "failed";
  captures_.Add({{"outcome", outcome}}).Increment();
}

void CoordinatorMetrics::count_swept(const SweptWrites& swept) {
  if (swept.files == 0) return;
  interrupted_writes_removed_.Increment(static_cast<double>(swept.files));
  interrupted_writes_removed_bytes_.Increment(static_cast<double>(swept.bytes));
  PODSCOPE_LOG(kWarning) << "removed " << swept.files << " temporary files (" << swept.bytes / 1024
                         << " KiB) of writes a crash or kill cut off under repository_root, and " << swept.directories
                         << " directories that held nothing else";
}

}  // namespace podscope::coordinator
