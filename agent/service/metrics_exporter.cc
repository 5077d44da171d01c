#include "agent/service/metrics_exporter.h"

#include <prometheus/gauge.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

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
      monitors_refused(prometheus::BuildCounter()
                           .Name("podscope_monitor_errors_total")
                           .Help("Monitor requests refused because max_concurrent_monitors were in flight.")
                           .Labels({{"host", host_name}})
                           .Register(registry)
                           .Add({})),
      reloads_refused(prometheus::BuildCounter()
                          .Name("podscope_config_reload_errors_total")
                          .Help("SIGHUP reloads refused because the config was invalid (the running config stays).")
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
    // Several workers, and a read timeout that frees a worker from a client that connects and says nothing:
    // with one worker and no timeout, one idle connection stalls every scrape for about 30 s.
    exporter->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", listen, "num_threads", "4", "request_timeout_ms", "1000"});
  } catch (const std::exception& e) {
    return absl::UnavailableError("metrics_listen " + listen + ": cannot listen: " + e.what());
  }
  exporter->exposer_->RegisterCollectable(registry);
  const std::vector<int> ports = exporter->exposer_->GetListeningPorts();
  exporter->port_ = ports.empty() ? 0 : ports.front();
  const std::string host = listen.substr(0, listen.rfind(':'));
  exporter->wake_host_ = host.empty() || host == "0.0.0.0" ? "127.0.0.1" : host;
  return exporter;
}

namespace {
void connect_once(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  close(fd);
}
}  // namespace

MetricsExporter::~MetricsExporter() {
  // civetweb's stop waits for its listener thread, which only looks at the stop flag when its poll() returns:
  // up to a second or two when idle. Connections wake it, so shutdown stays well inside its 3 s budget.
  std::atomic<bool> stopped{false};
  std::thread waker([this, &stopped] {
    while (!stopped.load()) {
      connect_once(wake_host_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer_.reset();
  stopped.store(true);
  waker.join();
}

}  // namespace podscope::agent
