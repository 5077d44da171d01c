// podscope-coordinator assembled: options, the worker registry (static list + registrations), the clock
// tracker, the gRPC services (podscope.v1.Coordinator, tensorflow.ProfileAnalysis) with the loopback self-check of
// their port, and the metrics server (/metrics, /healthz).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "coordinator/clock_tracker.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/pod_snapshots.h"
#include "daemon/grpc_health_service.h"
#include "daemon/options.h"
#include "tls/call_authorizer.h"
#include "front_door/daemon_servers.h"
#include "tls/tls_config.h"

namespace podscope::coordinator {

struct CoordinatorConfig {
  std::string listen = "0.0.0.0:6009";
  std::string metrics_listen = "0.0.0.0:9470";
  std::string metrics_web_config;  // TLS and basic auth of the metrics port (exporter-toolkit's format); "": none
  std::string repository_root;
  std::vector<std::string> workers;  // static workers, "host=host:port" or "host:port"
  int64_t heartbeat_interval_ms = 5000;
  int64_t clock_sync_interval_ms = 10'000;
  int64_t clock_sync_pings = 16;
  int64_t max_workers = 4096;
  int64_t pod_snapshot_before_ms = 10'000;        // a triggered pod snapshot's span before the slow step's end
  int64_t pod_snapshot_after_ms = 2'000;          // and after it
  int64_t pod_snapshot_min_interval_ms = 60'000;  // at most one pod snapshot of a job this often
  int64_t pod_snapshot_max_mb = 1024;             // none while the pod snapshots kept hold this much
  std::vector<std::string> registry_admins;       // who may forget any worker's name (podscope forget)
  std::string log_level = "info";
  tls::TlsConfig tls;  // every gRPC server and channel: tls_cert, tls_key, tls_client_ca, tls_ca, ...
};

void declare_coordinator_options(CoordinatorConfig& config, OptionSet& options);

class CoordinatorDaemon {
 public:
  explicit CoordinatorDaemon(CoordinatorConfig config);
  ~CoordinatorDaemon();
  absl::Status start();
  void shutdown();
  int grpc_port() const { return servers_ != nullptr ? servers_->grpc_port() : 0; }
  int metrics_port() const { return servers_ != nullptr ? servers_->metrics_port() : 0; }
  // The gRPC port passes its loopback self-check: the systemd watchdog is fed only then.
  bool serving() const { return servers_ != nullptr && servers_->serving(); }

 private:
  CoordinatorConfig config_;
  Clock clock_;
  CoordinatorSettings settings_;
  std::unique_ptr<WorkerRegistry> registry_;
  CoordinatorMetrics metrics_;
  std::unique_ptr<tls::CallAuthorizer> authorizer_;
  std::unique_ptr<CaptureRunner> runner_;
  std::unique_ptr<RegistrationCheck> registration_check_;
  std::unique_ptr<PodSnapshots> pod_snapshots_;
  std::unique_ptr<CoordinatorService> coordinator_service_;
  std::unique_ptr<ProfileAnalysisService> analysis_service_;
  GrpcHealthService health_service_;
  std::unique_ptr<ClockTracker> tracker_;
  std::unique_ptr<front_door::DaemonServers> servers_;
};

}  // namespace podscope::coordinator
