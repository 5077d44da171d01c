// Agent: owns everything podscope-agent runs — the Asio io_context (sampling timer, local socket), the series
// store, collectors, the capture service, the gRPC server and the Prometheus exporter — built from an
// AgentConfig. agent_main.cc only parses options, builds an Agent, starts it and relays signals.
//
// EXTENSION POINTS. Subsystems from other modules plug in between construction and start(), from
// install_extensions() in agent.cc (each engineer adds a marked block there):
//   add_collector            — a Collector sampled on the agent's pass (cheap, non-blocking: /proc, sysfs)
//   add_threaded_collector   — a Collector whose source can block (NVML, libtpu metrics): its own thread
//   add_capture_source       — a CaptureSource every capture window opens/closes/collects
//   step_tracker()           — the StepTracker Monitor level 2 reads (written by the local-socket server)
//   io_context()             — the Asio io_context the local-socket server runs on
//   registry()               — the prometheus::Registry, to add families
//   add_grpc_service         — another gRPC service on the agent's server (same port, same size limits)
//   add_component            — something with a start/stop lifecycle (local-socket server, registration client)
//   add_status_contributor   — fills its part of podscope.v1.AgentStatus (e.g. the local clients)
//   add_device_utilization_source — an accelerator Monitor may report (first with a figure wins, else the CPU)
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include "absl/status/status.h"
#include "agent/agent_config.h"
#include "agent/capture/capture_source.h"
#include "agent/collectors/collector.h"
#include "agent/devices/device_utilization.h"
#include "agent/steps/step_tracker.h"
#include "daemon/clock.h"
#include "podscope/v1/agent.pb.h"

namespace podscope::agent {

class SeriesStore;
class Sampler;
class ThreadedCollectorRunner;
class CaptureSessions;
class HostSeriesSource;
struct RequestMetrics;
class ClockHealthCollector;
class CpuCollector;
class MetricsExporter;
class ProfilerServiceImpl;
class AgentServiceImpl;

// A part of the agent with a lifecycle: started by Agent::start() after the built-in parts, stopped
// by Agent::shutdown() in reverse order, before the io_context stops.
class AgentComponent {
 public:
  virtual ~AgentComponent() = default;
  virtual std::string_view name() const = 0;
  virtual absl::Status start() = 0;
  virtual void stop() = 0;
};

class Agent {
 public:
  explicit Agent(const AgentConfig& config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // --- extension points (before start()) ---
  void add_collector(std::unique_ptr<Collector> collector);
  void add_threaded_collector(std::unique_ptr<Collector> collector, std::chrono::milliseconds period);
  void add_capture_source(std::unique_ptr<CaptureSource> source);
  void add_grpc_service(std::unique_ptr<grpc::Service> service);
  void add_component(std::unique_ptr<AgentComponent> component);
  void add_status_contributor(std::function<void(podscope::v1::AgentStatus&)> contributor);
  // `source` must live as long as the agent (typically a collector also given to the agent).
  void add_device_utilization_source(const DeviceUtilizationSource& source);
  StepTracker& step_tracker() { return step_tracker_; }
  boost::asio::io_context& io_context() { return io_; }
  prometheus::Registry& registry() { return *registry_; }
  SeriesStore& series() { return *series_; }
  const Clock& clock() const { return clock_; }
  const AgentConfig& config() const { return config_; }
  const std::string& host_name() const { return host_name_; }

  // Binds the gRPC and metrics ports, starts sampling, the io threads and the components, and logs
  // "podscope-agent listening grpc=HOST:PORT metrics=HOST:PORT".
  absl::Status start();
  // Ends a running capture (it is answered), stops everything and releases the ports; bounded (< 3 s).
  void shutdown();
  // Applies what can change without a restart (log level, sampling period, limits, repository root);
  // logs a warning for keys that need one.
  void reload(const AgentConfig& config);
  // Schedules `tick` every `period` on the io_context (the systemd watchdog: a stuck loop stops the pings).
  void every(std::chrono::milliseconds period, std::function<void()> tick);

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }

 private:
  void install_extensions();
  void fill_status(podscope::v1::AgentStatus& status) const;

  AgentConfig config_;
  std::string host_name_;
  Clock clock_;
  int64_t start_time_ns_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<SeriesStore> series_;
  StepTracker step_tracker_;
  std::vector<std::unique_ptr<Collector>> collectors_;  // sampled on the pass, in this order
  std::vector<std::unique_ptr<ThreadedCollectorRunner>> threaded_;
  CpuCollector* cpu_ = nullptr;               // for Monitor's utilization
  ClockHealthCollector* clock_health_ = nullptr;  // for status and capture warnings
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<CaptureSessions> captures_;
  std::unique_ptr<HostSeriesSource> host_source_;
  std::vector<std::unique_ptr<CaptureSource>> sources_;
  std::unique_ptr<RequestMetrics> request_metrics_;
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::vector<std::unique_ptr<AgentComponent>> components_;
  std::vector<std::function<void(podscope::v1::AgentStatus&)>> status_contributors_;
  std::vector<const DeviceUtilizationSource*> device_utilization_sources_;  // Monitor's order of preference
  std::unique_ptr<MetricsExporter> exporter_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::thread> io_threads_;
  struct PeriodicTask;
  std::vector<std::unique_ptr<PeriodicTask>> periodic_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace podscope::agent
