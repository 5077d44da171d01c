#include "coordinator/worker_registry.h"

#include <algorithm>

namespace podscope::coordinator {

WorkerRegistry::Worker& WorkerRegistry::upsert(const std::string& host_name, const std::string& address) {
  Worker& worker = workers_[host_name];
  if (!worker.connection || worker.connection->address != address) {
    // A capture may still hold the old connection: it lives on until that capture lets it go.
    worker.connection = pod_capture::connect_agent(address, credentials_);
    worker.drift = pod_capture::DriftEstimator();
    worker.known = false;
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

bool WorkerRegistry::is_stale(const Worker& worker, int64_t now_ns) const {
  return !worker.info.static_worker() && !worker.known && (!is_up(worker, now_ns) || worker.last_ping_failed);
}

bool WorkerRegistry::make_room(int64_t now_ns) {
  std::erase_if(workers_, [this, now_ns](const auto& entry) {
    const Worker& w = entry.second;
    return !w.info.static_worker() && !w.known && now_ns - w.registered_ns > down_after_ns_;
  });
  if (workers_.size() < max_workers_) return true;
  auto stalest = workers_.end();
  for (auto it = workers_.begin(); it != workers_.end(); ++it) {
    if (is_stale(it->second, now_ns) &&
        (stalest == workers_.end() || it->second.registered_ns < stalest->second.registered_ns)) {
      stalest = it;
    }
  }
  if (stalest == workers_.end()) return false;
  workers_.erase(stalest);
  return true;
}

absl::Status WorkerRegistry::ownership_refusal(const podscope::v1::RegisterRequest& request, const std::string& owner,
                                               int64_t now_ns) const {
  std::lock_guard lock(mu_);
  return ownership_refusal_locked(request, owner, now_ns);
}

absl::Status WorkerRegistry::ownership_refusal_locked(const podscope::v1::RegisterRequest& request,
                                                      const std::string& owner, int64_t now_ns) const {
  if (auto it = workers_.find(request.host_name()); it != workers_.end()) {
    const Worker& known = it->second;
    const bool moves = known.info.address() != request.address();
    if (moves && known.info.static_worker()) {
      return absl::PermissionDeniedError("worker " + request.host_name() + " is configured at " + known.info.address() +
                                         "; a registration from " + request.address() + " cannot move it");
    }
    if (!known.owner.empty() && known.owner != owner) {
      return absl::PermissionDeniedError("worker " + request.host_name() + " belongs to " + known.owner +
                                         ", who registered it; " + owner +
                                         " cannot take it over (an operator frees a name with `podscope forget`)");
    }
    // A worker that went down may come back anywhere (its agent restarted); a live one moves only with its agent.
    if (moves && is_up(known, now_ns) && request.instance_id() != known.instance_id) {
      return absl::PermissionDeniedError("worker " + request.host_name() + " is up at " + known.info.address() +
                                         " under another agent instance; a registration from " + request.address() +
                                         " cannot move it");
    }
  }
  return absl::OkStatus();
}

absl::Status WorkerRegistry::register_worker(const podscope::v1::RegisterRequest& request, const std::string& owner,
                                             int64_t now_ns) {
  std::lock_guard lock(mu_);
  if (absl::Status refused = ownership_refusal_locked(request, owner, now_ns); !refused.ok()) return refused;
  if (!workers_.contains(request.host_name()) && workers_.size() >= max_workers_ && !make_room(now_ns)) {
    return absl::ResourceExhaustedError("the coordinator already has " + std::to_string(workers_.size()) +
                                        " workers (max_workers), none of them stale; " + request.host_name() +
                                        " refused");
  }
  const bool is_new = !workers_.contains(request.host_name());
  Worker& worker = upsert(request.host_name(), request.address());
  if (is_new) worker.registered_ns = now_ns;
  worker.owner = owner;
  worker.instance_id = request.instance_id();
  worker.info.set_job(request.job());
  worker.info.mutable_labels()->clear();
  for (const auto& [k, v] : request.labels()) (*worker.info.mutable_labels())[k] = v;
  worker.info.set_last_heartbeat_ns(now_ns);
  return absl::OkStatus();
}

bool WorkerRegistry::heartbeat(const std::string& host_name, const std::string& address, const std::string& owner,
                               int64_t now_ns) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(host_name);
  if (it == workers_.end() || it->second.info.address() != address || it->second.owner != owner) return false;
  it->second.info.set_last_heartbeat_ns(now_ns);
  return true;
}

std::optional<std::string> WorkerRegistry::owner(const std::string& host_name) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(host_name);
  if (it == workers_.end() || it->second.owner.empty()) return std::nullopt;
  return it->second.owner;
}

bool WorkerRegistry::forget(const std::string& host_name) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(host_name);
  if (it == workers_.end() || it->second.info.static_worker()) return false;
  workers_.erase(it);
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
  worker.known = true;
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

std::shared_ptr<pod_capture::AgentConnection> WorkerRegistry::connection(const std::string& host_name) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(host_name);
  return it == workers_.end() ? nullptr : it->second.connection;
}

double WorkerRegistry::drift_ppm(const std::string& host_name) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(host_name);
  return it == workers_.end() ? 0.0 : it->second.info.clock_drift_ppm();
}

}  // namespace podscope::coordinator
