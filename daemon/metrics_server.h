// The HTTP server on a daemon's metrics_listen (used by podscope-agent and podscope-coordinator):
// /metrics serializes the Prometheus registry (kept current by its writers, so a scrape only serializes);
// /healthz answers 200 "ok" while every health check passes, else 503 with one line per failing check.
//
// One thread polls every connection, so a scrape is answered as soon as its request is in, whatever other
// connections do: idle, half-sent or slowly read ones wait on their own deadline and never occupy a worker. Each
// resource is bounded (connections, request size, time to send a request, time to read an answer); a connection
// closed at a bound is counted in podscope_metrics_connections_closed_total{reason}.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "daemon/health_check.h"

namespace podscope {

class MetricsServer {
 public:
  // Binds `listen` ("host:port"; port 0 picks one). The registry and the checks must outlive the server; its own
  // counters carry `labels` (the agent's host).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> start(const std::string& listen,
                                                              std::shared_ptr<prometheus::Registry> registry,
                                                              std::vector<const HealthCheck*> health_checks,
                                                              const prometheus::Labels& labels = {});
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

 private:
  struct Connection;
  struct ClosedCounters {
    prometheus::Counter* request_timeout;
    prometheus::Counter* write_timeout;
    prometheus::Counter* request_too_large;
    prometheus::Counter* evicted_at_limit;
  };

  MetricsServer(std::shared_ptr<prometheus::Registry> registry, std::vector<const HealthCheck*> health_checks);
  void serve();
  void accept_connections(std::vector<Connection>& connections);
  // Reads what the peer sent; once the headers are in, the answer is queued. False: close it.
  bool read_request(Connection& connection);
  bool write_answer(Connection& connection);
  std::string answer(const std::string& request_head) const;
  std::string metrics_body() const;
  std::string health_body(int& status) const;

  std::shared_ptr<prometheus::Registry> registry_;
  std::vector<const HealthCheck*> health_checks_;
  ClosedCounters closed_{};
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd written at shutdown
  int port_ = 0;
  std::thread thread_;
};

}  // namespace podscope
