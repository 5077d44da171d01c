#include "coordinator/worker_registry.h"

#include <algorithm>

namespace podscope::coordinator {

WorkerRegistry::Worker& WorkerRegistry::upsert(const std::string& host_name, const std::string& address) {
  Worker& worker = workers_[host_name];
  if (!worker.connection || worker.connection->address != address) {
    // A re-registration from a new address replaces the connection; the old one may still be in use by a
    // capture, so connections are kept, never destroyed while the registry lives.
    if (worker.connection) retired_.push_back(std::move(worker.connection));
    worker.connection = pod_capture::connect_agent(address, credentials_);
    worker.drift = pod_capture::DriftEstimator();
  }
  worker.info.set_host_name(host_name);
  worker.info.set_address(address);
  return worker;
}

void WorkerRegistry::add_static(const std::string& host_name, const std::string& address) {
  std::lock_guard lock(mu_);
  Worker& worker = upsert(host_name, address);
  worker.info.set_static_worker(true);
}

absl::Status WorkerRegistry::register_worker(const podscope::v1::RegisterRequest& request, int64_t now_ns) {
  std::lock_guard lock(mu_);
  if (auto it = workers_.find(request.host_name()); it != workers_.end()) {
    const Worker& known = it->second;
    const bool moves = known.info.address() != request.address();
    if (moves && known.info.static_worker()) {
      return absl::PermissionDeniedError("worker " + request.host_name() + " is configured at " + known.info.address() +
                                         "; a registration from " + request.address() + " cannot move it");
    }
    // A worker that went down may come back anywhere (its agent restarted); a live one moves only with its agent.
    if (moves && is_up(known, now_ns) && request.instance_id() != known.instance_id) {
      return absl::PermissionDeniedError("worker " + request.host_name() + " is up at " + known.info.address() +
                                         " under another agent instance; a registration from " + request.address() +
                                         " cannot move it");
    }
  } else if (workers_.size() >= max_workers_) {
    return absl::ResourceExhaustedError("the coordinator already has " + std::to_string(workers_.size()) +
                                        " workers (max_workers); " + request.host_name() + " refused");
  }
  Worker& worker = upsert(request.host_name(), request.address());
  worker.instance_id = request.instance_id();
  worker.info.set_job(request.job());
  worker.info.mutable_labels()->clear();
  for (const auto& [k, v] : request.labels()) (*worker.info.mutable_labels())[k] = v;
  worker.info.set_last_heartbeat_ns(now_ns);
  return absl::OkStatus();
}

bool WorkerRegistry::heartbeat(const std::string& host_name, const std::string& address, int64_t now_ns) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(host_name);
  if (it == workers_.end() || it->second.info.address() != address) return false;
  it->second.info.set_last_heartbeat_ns(now_ns);
  return true;
}

void WorkerRegistry::record_clock(const std::string& host_name, const pod_capture::ClockMeasurement& measurement,
                                  int64_t now_ns) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(host_name);
  if (it == workers_.end()) return;
  Worker& worker = it->second;
  worker.last_ping_failed = measurement.kind != pod_capture::ClockMeasurement::kMeasured;
  if (worker.last_ping_failed) return;
  // Static workers have no heartbeat: an answered ping is their sign of life.
  if (worker.info.static_worker()) worker.info.set_last_heartbeat_ns(now_ns);
  worker.info.set_clock_offset_ns(measurement.estimate.offset_ns);
  worker.info.set_clock_rtt_ns(measurement.estimate.rtt_ns);
  worker.drift.add(measurement.estimate);
  worker.info.set_clock_drift_ppm(worker.drift.drift_ppm());
}

bool WorkerRegistry::is_up(const Worker& worker, int64_t now_ns) const {
  if (worker.info.static_worker() && worker.last_ping_failed) return false;
  return worker.info.last_heartbeat_ns() > 0 && now_ns - worker.info.last_heartbeat_ns() <= down_after_ns_;
}

std::vector<podscope::v1::WorkerInfo> WorkerRegistry::list(int64_t now_ns) const {
  std::lock_guard lock(mu_);
  std::vector<podscope::v1::WorkerInfo> out;
  for (const auto& [name, worker] : workers_) {
    out.push_back(worker.info);
    out.back().set_up(is_up(worker, now_ns));
  }
  return out;
}

WorkerRegistry::Selection WorkerRegistry::select(const WorkerSelector& selector, int64_t now_ns) const {
  std::lock_guard lock(mu_);
  Selection out;
  for (const auto& [name, worker] : workers_) {
    bool match = selector.empty();
    const auto& info = worker.info;
    for (const auto& h : selector.hosts) match |= (h == info.host_name() || h == info.address());
    for (const auto& j : selector.jobs) match |= (j == info.job());
    if (!selector.labels.empty()) {
      bool all = true;
      for (const auto& [k, v] : selector.labels) {
        auto it = info.labels().find(k);
        all &= (it != info.labels().end() && it->second == v);
      }
      match |= all;
    }
    if (match) (is_up(worker, now_ns) ? out.host_names : out.down).push_back(name);
  }
  for (const auto& h : selector.hosts) {
    const bool known = std::any_of(workers_.begin(), workers_.end(), [&](const auto& entry) {
      return entry.first == h || entry.second.info.address() == h;
    });
    if (!known) out.unknown.push_back(h);
  }
  return out;
}

pod_capture::AgentConnection* WorkerRegistry::connection(const std::string& host_name) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(host_name);
  return it == workers_.end() ? nullptr : it->second.connection.get();
}

double WorkerRegistry::drift_ppm(const std::string& host_name) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(host_name);
  return it == workers_.end() ? 0.0 : it->second.info.clock_drift_ppm();
}

}  // namespace podscope::coordinator
