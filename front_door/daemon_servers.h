// A daemon's front door, the one way podscope-agent and podscope-coordinator serve: the gRPC server on `listen`
// (TLS as configured, and the plaintext loopback port when asked for) under the same limits for both, the
// loopback self-check of its port, the TLS metrics, and the metrics server (/metrics, /healthz) that reports the
// self-check. While the port passes its self-check the daemon is serving(): the systemd watchdog is fed only then.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "daemon/clock.h"
#include "daemon/grpc_self_check.h"
#include "daemon/metrics_server.h"
#include "tls/tls_config.h"
#include "tls/tls_metrics.h"

namespace podscope::front_door {

struct DaemonServerSettings {
  std::string listen;              // the gRPC port, "host:port" (port 0 picks one)
  std::string metrics_listen;      // the metrics server's
  std::string metrics_web_config;  // its TLS and basic auth (exporter-toolkit's web-config file); empty: none
  tls::TlsConfig tls;
  // The largest request the gRPC port accepts (gRPC's own default unless the daemon sets one): a larger one is
  // refused from its declared length.
  size_t max_request_bytes = size_t{4} << 20;
  std::vector<grpc::Service*> services;  // they outlive the servers
  prometheus::Labels labels;             // on the front door's own metrics (the agent's host)
};

class DaemonServers {
 public:
  // Binds both ports and starts the self-check; an error names the address that could not be had (listen and
  // plaintext_listen both when one of them could not: gRPC does not say which).
  static absl::StatusOr<std::unique_ptr<DaemonServers>> start(DaemonServerSettings settings, const Clock& clock,
                                                              std::shared_ptr<prometheus::Registry> registry);
  // Shuts the gRPC server down (when shutdown() did not) and waits for its calls; closes the metrics server.
  ~DaemonServers();
  DaemonServers(const DaemonServers&) = delete;
  DaemonServers& operator=(const DaemonServers&) = delete;

  // The self-check stops first (a server that is shutting down answers NOT_SERVING: that is no failure of the
  // port), then the gRPC server refuses new calls and cancels what is in flight after `drain`.
  void shutdown(std::chrono::milliseconds drain);

  // The gRPC port has not failed its loopback self-check several times in a row (it still accepts connections).
  bool serving() const { return !self_check_->wedged(); }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_server_->port(); }
  // "grpc=HOST:PORT metrics=HOST:PORT[ plaintext=HOST:PORT][ tls][ metrics_tls][ metrics_basic_auth]", the bound
  // ports and what secures them, for the daemon's start line.
  std::string listening() const;

 private:
  explicit DaemonServers(DaemonServerSettings settings);

  const DaemonServerSettings settings_;
  int grpc_port_ = 0;
  int plaintext_port_ = 0;  // plaintext_listen's bound port; 0 without it
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<tls::TlsMetrics> tls_metrics_;
  std::unique_ptr<GrpcSelfCheck> self_check_;
  std::unique_ptr<MetricsServer> metrics_server_;
};

}  // namespace podscope::front_door
