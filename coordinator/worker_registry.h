// The coordinator's view of its workers: agents that registered (and heartbeat) plus a static list from
// its YAML. A worker's name belongs to the identity that first registered it (its certificate with TLS, its address
// without) until an operator forgets it: nobody else can take it over, up or down. A worker becomes known once the
// coordinator has measured its clock (an agent answers there); a known worker silent for longer than the down-after
// interval is marked down, never dropped, so `podscope status` and the metrics show it. A registration that never
// became known expires after that interval, and when max_workers is reached such stale entries make room first;
// known workers are never evicted, so a returning agent always finds its name. Thread-safe; owns one
// pod_capture::AgentConnection per worker.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/security/credentials.h>

#include "absl/status/status.h"
#include "pod_capture/agent_connection.h"
#include "pod_capture/clock_sync.h"
#include "podscope/v1/coordinator.pb.h"

namespace podscope::coordinator {

struct WorkerSelector {
  std::vector<std::string> hosts;
  std::vector<std::string> jobs;
  std::map<std::string, std::string> labels;
  bool empty() const { return hosts.empty() && jobs.empty() && labels.empty(); }
};

class WorkerRegistry {
 public:
  // Workers are dialled with `credentials` (tls::channel_credentials of the coordinator's config).
  WorkerRegistry(int64_t down_after_ns, size_t max_workers, std::shared_ptr<grpc::ChannelCredentials> credentials)
      : down_after_ns_(down_after_ns), max_workers_(max_workers), credentials_(std::move(credentials)) {}

  // Static workers are always known; they are up while their clock-sync pings answer.
  void add_static(const std::string& host_name, const std::string& address);
  // `owner` is who registers: the caller's certificate identity with TLS, its network address without. Refused
  // (PERMISSION_DENIED) when the name belongs to another owner, or would move a static worker or a live worker of
  // another agent instance to a new address; RESOURCE_EXHAUSTED when a new worker would pass max_workers and no
  // stale registration can make room.
  absl::Status register_worker(const podscope::v1::RegisterRequest& request, const std::string& owner, int64_t now_ns);
  // The PERMISSION_DENIED register_worker would answer now, else OK: asked before a registration is checked
  // (RegistrationCheck), so that one refused anyway calls no agent back.
  absl::Status ownership_refusal(const podscope::v1::RegisterRequest& request, const std::string& owner,
                                 int64_t now_ns) const;
  // False when the worker is unknown, or registered elsewhere or by another owner (it must register again).
  bool heartbeat(const std::string& host_name, const std::string& address, const std::string& owner, int64_t now_ns);
  // Who registered `host_name`; nullopt for an unknown worker or a static one no agent registered.
  std::optional<std::string> owner(const std::string& host_name) const;
  // Frees a registered worker's name for anyone (an operator's call); false for an unknown or static worker.
  bool forget(const std::string& host_name);
  void record_clock(const std::string& host_name, const pod_capture::ClockMeasurement& measurement, int64_t now_ns);

  std::vector<podscope::v1::WorkerInfo> list(int64_t now_ns) const;
  // Host names of the workers that match (every worker for an empty selector), up and down apart, plus the
  // host names or addresses in `selector.hosts` that match no worker.
  struct Selection {
    std::vector<std::string> host_names;  // up
    std::vector<std::string> down;
    std::vector<std::string> unknown;
  };
  Selection select(const WorkerSelector& selector, int64_t now_ns) const;
  // The connection for a worker, or null; it stays usable while held, even after the worker is replaced.
  std::shared_ptr<pod_capture::AgentConnection> connection(const std::string& host_name) const;
  double drift_ppm(const std::string& host_name) const;

 private:
  struct Worker {
    podscope::v1::WorkerInfo info;
    std::shared_ptr<pod_capture::AgentConnection> connection;
    pod_capture::DriftEstimator drift;
    bool last_ping_failed = false;  // decides a static worker's state at once, without waiting for the window
    std::string instance_id;        // of the agent that registered it
    std::string owner;              // who registered it (empty: a static worker no agent registered)
    bool known = false;             // its clock was measured at its current address
    int64_t registered_ns = 0;
  };
  bool is_up(const Worker& worker, int64_t now_ns) const;
  absl::Status ownership_refusal_locked(const podscope::v1::RegisterRequest& request, const std::string& owner,
                                        int64_t now_ns) const;
  // A registration that never became known, and is down or unreachable.
  bool is_stale(const Worker& worker, int64_t now_ns) const;
  // Drops expired registrations; when still full, the stalest stale one. False when no room could be made.
  bool make_room(int64_t now_ns);
  Worker& upsert(const std::string& host_name, const std::string& address);

  const int64_t down_after_ns_;
  const size_t max_workers_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  mutable std::mutex mu_;
  std::map<std::string, Worker> workers_;  // by host name
};

}  // namespace podscope::coordinator
