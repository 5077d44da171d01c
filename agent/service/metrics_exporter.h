// The Prometheus side of the agent: the pull exposer on --metrics_listen serving the registry (which the
// sampling pass keeps current, so a scrape only serializes), podscope_build_info, and the request counters
// the gRPC services bump.
#pragma once

#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"

namespace podscope::agent {

struct RequestMetrics {
  RequestMetrics(prometheus::Registry& registry, const std::string& host_name);
  prometheus::Counter& captures_served;
  prometheus::Counter& captures_refused;
  prometheus::Counter& monitors_refused;  // over max_concurrent_monitors
  prometheus::Counter& reloads_refused;   // SIGHUP with an invalid config
  prometheus::Counter& monitors_served;
};

void register_build_info(prometheus::Registry& registry, const std::string& host_name, const std::string& version);

class MetricsExporter {
 public:
  // Binds `listen` ("host:port"; port 0 picks one) and serves `registry` at /metrics.
  static absl::StatusOr<std::unique_ptr<MetricsExporter>> start(const std::string& listen,
                                                                std::shared_ptr<prometheus::Registry> registry);
  ~MetricsExporter();
  int port() const { return port_; }

 private:
  MetricsExporter() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string wake_host_;  // where a connection reaches the listener (loopback for a wildcard address)
  int port_ = 0;
};

}  // namespace podscope::agent
