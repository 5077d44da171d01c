#include "coordinator/coordinator_daemon.h"

#include "daemon/atomic_file.h"
#include "daemon/log.h"
#include "daemon/metrics_server.h"
#include "tls/credentials.h"

namespace podscope::coordinator {

void declare_coordinator_options(CoordinatorConfig& c, OptionSet& o) {
  o.add_string("listen", &c.listen,
               "gRPC address (podscope.v1.Coordinator, tensorflow.ProfileAnalysis); port 0 picks one");
  o.add_string("metrics_listen", &c.metrics_listen, "Prometheus /metrics address; port 0 picks one");
  o.add_string("metrics_web_config", &c.metrics_web_config, kMetricsWebConfigHelp);
  o.add_string("repository_root", &c.repository_root,
               "Directory captures are kept under (<root>/plugins/profile/<run>); NewSession writes only inside it");
  o.add_list("workers", &c.workers, "Static workers: \"name=host:port\" or \"host:port\"");
  o.add_int("heartbeat_interval_ms", &c.heartbeat_interval_ms,
            "Heartbeat period asked of agents; silent for 3 periods means down", 100, 3'600'000);
  o.add_int("clock_sync_interval_ms", &c.clock_sync_interval_ms, "Period of the clock-sync burst to every worker", 100,
            3'600'000);
  o.add_int("clock_sync_pings", &c.clock_sync_pings, "Pings per clock-sync burst", 1, 1000);
  o.add_int("max_workers", &c.max_workers,
            "Most workers the registry holds (each has a gRPC channel); registrations beyond are refused", 1,
            1'000'000);
  o.add_int("pod_snapshot_before_ms", &c.pod_snapshot_before_ms,
            "A triggered pod snapshot (an agent's slow step) covers this long before the slow step's end, at most the "
            "agents' flight_recorder_seconds",
            1, 3'600'000);
  o.add_int("pod_snapshot_after_ms", &c.pod_snapshot_after_ms,
            "...and this long after it (the snapshot is taken once that has passed)", 0, 600'000);
  o.add_int("pod_snapshot_min_interval_ms", &c.pod_snapshot_min_interval_ms,
            "At most one triggered pod snapshot of a job this often, whatever cool-down the reporting agent has; "
            "reports in between are answered and counted (podscope_coordinator_pod_snapshots_skipped_total)",
            0, 86'400'000);
  o.add_int("pod_snapshot_max_mb", &c.pod_snapshot_max_mb,
            "No triggered pod snapshot is taken while those under repository_root hold this many MiB (counted)", 1,
            1'000'000);
  o.add_list("registry_admins", &c.registry_admins,
             "Who may forget any worker's name (podscope forget) besides, with TLS, the certificate that registered "
             "it: certificate names as allowed_clients matches them, or without TLS caller addresses (e.g. "
             "127.0.0.1 for the coordinator's own host); empty: nobody else");
  o.add_string("log_level", &c.log_level, "debug, info, warning or error");
  o.add_check("log_level", [&c] { return parse_log_level(c.log_level).status(); });
  tls::declare_tls_options(c.tls, o, tls::TlsRole::kDaemon);
}

CoordinatorDaemon::CoordinatorDaemon(CoordinatorConfig config) : config_(std::move(config)) {}

CoordinatorDaemon::~CoordinatorDaemon() { shutdown(); }

absl::Status CoordinatorDaemon::start() {
  if (absl::Status s = tls::check_tls_config(config_.tls); !s.ok()) return s;
  if (absl::Status s = tls::check_tls_files(config_.tls); !s.ok()) return s;
  if (!config_.repository_root.empty()) metrics_.count_swept(sweep_interrupted_writes(config_.repository_root));
  settings_.repository_root = config_.repository_root;
  settings_.heartbeat_interval_ms = config_.heartbeat_interval_ms;
  settings_.clock_sync_pings = static_cast<int>(config_.clock_sync_pings);
  settings_.tls_on = config_.tls.serves_tls();
  settings_.registry_admins = config_.registry_admins;
  // Static workers prove liveness by answering clock-sync pings, so their window follows that period.
  registry_ = std::make_unique<WorkerRegistry>(
      3 * std::max(config_.heartbeat_interval_ms, config_.clock_sync_interval_ms) * 1'000'000,
      static_cast<size_t>(config_.max_workers), tls::channel_credentials(config_.tls));
  for (const auto& entry : config_.workers) {
    const size_t eq = entry.find('=');
    const std::string address = eq == std::string::npos ? entry : entry.substr(eq + 1);
    const std::string name = eq == std::string::npos ? entry : entry.substr(0, eq);
    auto parsed = pod_capture::parse_service_addresses(address);
    if (!parsed.ok() || parsed->size() != 1) {
      return absl::InvalidArgumentError("workers: \"" + entry + "\" is not name=host:port or host:port");
    }
    registry_->add_static(name, parsed->front());
  }
  // Before the server: registrations wake it.
  tracker_ = std::make_unique<ClockTracker>(*registry_, metrics_, clock_, config_.clock_sync_interval_ms,
                                            static_cast<int>(config_.clock_sync_pings));
  runner_ = std::make_unique<CaptureRunner>(*registry_, metrics_, clock_);
  pod_snapshots_ = std::make_unique<PodSnapshots>(
      *registry_, *runner_,
      PodSnapshotSettings{config_.repository_root, config_.pod_snapshot_before_ms, config_.pod_snapshot_after_ms,
                          static_cast<int>(config_.clock_sync_pings), config_.pod_snapshot_min_interval_ms,
                          config_.pod_snapshot_max_mb << 20},
      clock_, metrics_);
  authorizer_ = std::make_unique<tls::CallAuthorizer>(config_.tls, *metrics_.registry(), prometheus::Labels{});
  registration_check_ = std::make_unique<RegistrationCheck>(tls::channel_credentials(config_.tls));
  coordinator_service_ =
      std::make_unique<CoordinatorService>(*registry_, *runner_, settings_, clock_, metrics_, *pod_snapshots_,
                                           *authorizer_, *registration_check_, [this] { tracker_->wake(); });
  analysis_service_ = std::make_unique<ProfileAnalysisService>(*registry_, *runner_, settings_, clock_, *authorizer_);

  absl::StatusOr<std::unique_ptr<front_door::DaemonServers>> servers = front_door::DaemonServers::start(
      {.listen = config_.listen,
       .metrics_listen = config_.metrics_listen,
       .metrics_web_config = config_.metrics_web_config,
       .tls = config_.tls,
       .services = {coordinator_service_.get(), analysis_service_.get(), &health_service_},
       .labels = {}},
      clock_, metrics_.registry());
  if (!servers.ok()) return servers.status();
  servers_ = std::move(*servers);
  PODSCOPE_LOG(kInfo) << "podscope-coordinator listening " << servers_->listening() << " (" << config_.workers.size()
                      << " static worker(s))";
  return absl::OkStatus();
}

void CoordinatorDaemon::shutdown() {
  // A pod run in progress ends at once, so that the server's calls (Capture, NewSession) answer; then the server: its
  // Register handler wakes the tracker.
  if (runner_) runner_->stop();
  if (servers_) servers_->shutdown(std::chrono::seconds(2));
  if (pod_snapshots_) pod_snapshots_->stop();
  tracker_.reset();
  servers_.reset();
}

}  // namespace podscope::coordinator
