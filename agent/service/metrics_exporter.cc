#include "agent/service/metrics_exporter.h"

#include <prometheus/gauge.h>

#include <stdexcept>

namespace podscope::agent {

RequestMetrics::RequestMetrics(prometheus::Registry& registry, const std::string& host_name)
    : captures_served(prometheus::BuildCounter()
                          .Name("podscope_captures_total")
                          .Help("Profile requests answered with a capture.")
                          .Labels({{"host", host_name}})
                          .Register(registry)
                          .Add({})),
      captures_refused(prometheus::BuildCounter()
                           .Name("podscope_capture_errors_total")
                           .Help("Profile requests refused (invalid, one already running, shutting down).")
                           .Labels({{"host", host_name}})
                           .Register(registry)
                           .Add({})),
      monitors_served(prometheus::BuildCounter()
                          .Name("podscope_monitors_total")
                          .Help("Monitor requests answered.")
                          .Labels({{"host", host_name}})
                          .Register(registry)
                          .Add({})) {}

void register_build_info(prometheus::Registry& registry, const std::string& host_name, const std::string& version) {
  prometheus::BuildGauge()
      .Name("podscope_build_info")
      .Help("Always 1; the labels say which podscope-agent build runs.")
      .Labels({{"host", host_name}})
      .Register(registry)
      .Add({{"version", version}})
      .Set(1);
}

absl::StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::start(
    const std::string& listen, std::shared_ptr<prometheus::Registry> registry) {
  std::unique_ptr<MetricsExporter> exporter(new MetricsExporter());
  try {
    exporter->exposer_ = std::make_unique<prometheus::Exposer>(listen, 1);
  } catch (const std::exception& e) {
    return absl::UnavailableError("metrics_listen " + listen + ": cannot listen: " + e.what());
  }
  exporter->exposer_->RegisterCollectable(registry);
  const std::vector<int> ports = exporter->exposer_->GetListeningPorts();
  exporter->port_ = ports.empty() ? 0 : ports.front();
  return exporter;
}

}  // namespace podscope::agent
