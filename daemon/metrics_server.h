// The HTTP server on a daemon's metrics_listen (used by podscope-agent and podscope-coordinator), Boost.Beast on
// one Asio thread: /metrics serializes the Prometheus registry (kept current by its writers, so a scrape only
// serializes), gzipped when the scraper accepts it; /healthz answers 200 "ok" while every health check passes, else
// 503 with one line per failing check. GET and HEAD; every answer closes its connection.
//
// metrics_web_config (daemon/metrics_web_config.h) adds TLS and basic authentication as node_exporter's
// --web.config.file does; the file and the files it names are read again when they change (checked at most once a
// second, when a connection arrives), so a rotated certificate is served without a restart.
//
// Every resource is bounded and every bound counted in podscope_metrics_connections_closed_total{reason}: connections
// (64: at the limit a new one pushes out the oldest that has not sent a whole request, else the answer in progress
// longest, so that clients that never read cannot keep scrapers out), the request head (8 KiB: 431),
// the time to handshake and send it, the time to read the answer. A rendered /metrics body is shared by the scrapes
// that overlap it, and at most kMaxHeldRenders are held for slow readers: past that a scrape is answered with the
// newest held render (counted in podscope_metrics_held_renders_served_total), so that clients that never read hold
// a bounded amount of memory whatever their number.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "daemon/health_check.h"

namespace podscope {

// The help of option metrics_web_config, the same on both daemons.
inline constexpr char kMetricsWebConfigHelp[] =
    "TLS and basic auth of the metrics port: a web-config file of Prometheus's exporter-toolkit, as node_exporter's "
    "--web.config.file (tls_server_config: cert_file, key_file, client_auth_type, client_ca_file; basic_auth_users: "
    "bcrypt hashes); read again when it or its files change. Empty: plain HTTP, no authentication";

struct MetricsServerSettings {
  std::string listen{};      // "host:port" ("[v6]:port"; an empty or "*" host is every IPv4 address); port 0 picks one
  std::string web_config{};  // exporter-toolkit web-config file; empty: plain HTTP without authentication
  prometheus::Labels labels{};  // on the server's own metrics (the agent's host)
};

class MetricsServer {
 public:
  // Reads the web config and binds; an error names the option and the file or address. The registry and the checks
  // must outlive the server.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> start(const MetricsServerSettings& settings,
                                                              std::shared_ptr<prometheus::Registry> registry,
                                                              std::vector<const HealthCheck*> health_checks);
  // Closes every connection and returns within a check in progress (basic auth's bcrypt).
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const;
  // What the web config turned on when the server started, for the daemon's start line.
  bool serves_tls() const;
  bool requires_basic_auth() const;

  class Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace podscope
