#include "agent/agent.h"

#include <climits>

#include <boost/asio/post.hpp>

#include "agent/capture/capture_session.h"
#include "agent/local/local_clients_plugin.h"
#include "agent/devices/upstream_source.h"
#include "agent/capture/host_series_source.h"
#include "agent/collectors/clock_health_collector.h"
#include "agent/collectors/cpu_collector.h"
#include "agent/devices/nvml_collector.h"
#include "agent/collectors/host_collectors.h"
#include "agent/collectors/sampler.h"
#include "agent/series/series_store.h"
#include "agent/devices/tpu_chips.h"
#include "agent/devices/tpu_metric_client.h"
#include "agent/devices/tpu_runtime_collector.h"
#include "agent/service/agent_service.h"
#include "agent/service/coordinator_registration.h"
#include "agent/service/metrics_exporter.h"
#include "agent/service/profiler_service.h"
#include "daemon/log.h"
#include "daemon/unix_socket_path.h"

namespace podscope::agent {
namespace {

// "0.0.0.0:0" with the bound port 41234 → "0.0.0.0:41234".
std::string with_port(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  return (colon == std::string::npos ? address : address.substr(0, colon)) + ":" + std::to_string(port);
}

podscope::v1::CollectorStatus::State to_proto(CollectorState::State s) {
  switch (s) {
    case CollectorState::State::kOk: return podscope::v1::CollectorStatus::OK;
    case CollectorState::State::kDegraded: return podscope::v1::CollectorStatus::DEGRADED;
    case CollectorState::State::kUnavailable: return podscope::v1::CollectorStatus::UNAVAILABLE;
  }
  return podscope::v1::CollectorStatus::UNKNOWN;
}

}  // namespace

Agent::Agent(const AgentConfig& config)
    : config_(config),
      host_name_(effective_host_name(config)),
      clock_(config.clock_offset_ns),
      start_time_ns_(clock_.now_ns()),
      work_(boost::asio::make_work_guard(io_)),
      registry_(std::make_shared<prometheus::Registry>()),
      series_(std::make_unique<SeriesStore>(*registry_, host_name_,
                                            SeriesStore::capacity_for(config.max_duration_ms,
                                                                      config.sample_interval_ms))),
      sampler_(std::make_unique<Sampler>(io_, clock_, *series_, *registry_, host_name_,
                                         std::chrono::milliseconds(config.sample_interval_ms))),
      captures_(std::make_unique<CaptureSessions>(clock_, host_name_, [this] { return sampler_->run_pass(); })),
      request_metrics_(std::make_unique<RequestMetrics>(*registry_, host_name_)) {
  register_build_info(*registry_, host_name_, PODSCOPE_VERSION);
  captures_->set_limits({config.max_duration_ms, config.repository_root});

  HostCollectors host = make_host_collectors();
  cpu_ = host.cpu;
  clock_health_ = host.clock_health;
  for (auto& collector : host.all) add_collector(std::move(collector));

  install_extensions();
}

// EXTENSION POINTS: each module that plugs into the agent adds its block here, using config() for its keys.
void Agent::install_extensions() {
  // --- local socket server and step tracker ---
  install_local_clients(*this);

  // --- device collectors (NVML, libtpu metrics: add_threaded_collector) and upstream profiler servers
  //     (add_capture_source) ---
  // Both device collectors always run: each reports "unavailable: <reason>" on hosts without its device.
  // libtpu is queried every second from startup, since the runtime comes up with the training job.
  // Monitor reports the TPU while its metric service answers, else a GPU NVML sees, else the host CPU.
  auto tpu = std::make_unique<TpuRuntimeCollector>(std::make_unique<TpuMetricClient>(config().tpu_metrics_addr),
                                                   discover_tpu_chips());
  auto nvml = std::make_unique<NvmlCollector>();
  add_device_utilization_source(*tpu);
  add_device_utilization_source(*nvml);
  add_threaded_collector(std::move(nvml), std::chrono::milliseconds(config().sample_interval_ms));
  add_threaded_collector(std::move(tpu), std::chrono::seconds(1));
  if (!config().upstream.empty()) add_capture_source(std::make_unique<UpstreamSource>(config().upstream));

  // --- coordinator registration client (add_component / add_grpc_service) ---
  if (!config().coordinator.empty()) {
    RegistrationSettings registration;
    registration.coordinator = config().coordinator;
    registration.host_name = host_name();
    registration.job = config().job;
    registration.advertised_address = [this] {
      return advertised_agent_address(config().listen, grpc_port(), host_name());
    };
    add_component(std::make_unique<CoordinatorRegistration>(std::move(registration)));
  }
}

Agent::~Agent() { shutdown(); }

void Agent::add_collector(std::unique_ptr<Collector> collector) {
  sampler_->add(*collector);
  collectors_.push_back(std::move(collector));
}

void Agent::add_threaded_collector(std::unique_ptr<Collector> collector, std::chrono::milliseconds period) {
  auto runner = std::make_unique<ThreadedCollectorRunner>(std::move(collector), period, clock_, *series_);
  sampler_->status_metrics().add(runner->collector());
  threaded_.push_back(std::move(runner));
}

void Agent::add_capture_source(std::unique_ptr<CaptureSource> source) {
  captures_->add_source(*source);
  sources_.push_back(std::move(source));
}

void Agent::add_device_utilization_source(const DeviceUtilizationSource& source) {
  device_utilization_sources_.push_back(&source);
}

void Agent::add_grpc_service(std::unique_ptr<grpc::Service> service) { services_.push_back(std::move(service)); }

void Agent::add_component(std::unique_ptr<AgentComponent> component) { components_.push_back(std::move(component)); }

void Agent::add_status_contributor(std::function<void(podscope::v1::AgentStatus&)> contributor) {
  status_contributors_.push_back(std::move(contributor));
}

struct Agent::PeriodicTask {
  PeriodicTask(boost::asio::io_context& io, std::chrono::milliseconds period, std::function<void()> tick)
      : timer(io), period(period), tick(std::move(tick)) {}
  void arm() {
    timer.expires_after(period);
    timer.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      tick();
      arm();
    });
  }
  boost::asio::steady_timer timer;
  std::chrono::milliseconds period;
  std::function<void()> tick;
};

void Agent::every(std::chrono::milliseconds period, std::function<void()> tick) {
  periodic_.push_back(std::make_unique<PeriodicTask>(io_, period, std::move(tick)));
  periodic_.back()->arm();
}

absl::Status Agent::start() {
  if (!config_.socket.empty()) {
    if (absl::Status s = remove_stale_socket(config_.socket); !s.ok()) return s;
  }

  std::vector<const Collector*> all_collectors;
  for (const auto& c : collectors_) all_collectors.push_back(c.get());
  for (const auto& r : threaded_) all_collectors.push_back(&r->collector());
  host_source_ = std::make_unique<HostSeriesSource>(*series_, HostDescription::of_this_host(host_name_),
                                                    std::move(all_collectors));
  captures_->add_source(*host_source_);

  services_.insert(services_.begin(),
                   std::make_unique<ProfilerServiceImpl>(*captures_, *cpu_, device_utilization_sources_,
                                                         [this] { return sampler_->run_pass(); },
                                                         step_tracker_, clock_, *request_metrics_));
  services_.insert(services_.begin(), std::make_unique<AgentServiceImpl>(
                                          clock_, [this](podscope::v1::AgentStatus& s) { fill_status(s); }));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config_.listen, grpc::InsecureServerCredentials(), &grpc_port_);
  // A long capture's XSpace can pass 1 GiB: allow the largest message gRPC can carry.
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.SetMaxSendMessageSize(INT_MAX);
  for (const auto& service : services_) builder.RegisterService(service.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || grpc_port_ == 0) {
    server_.reset();
    return absl::UnavailableError("listen " + config_.listen + ": cannot bind the gRPC port (in use or bad address)");
  }
  absl::StatusOr<std::unique_ptr<MetricsExporter>> exporter = MetricsExporter::start(config_.metrics_listen, registry_);
  if (!exporter.ok()) return exporter.status();
  exporter_ = std::move(*exporter);
  metrics_port_ = exporter_->port();

  sampler_->run_pass();  // metrics and rates have a first point before the first period ends
  sampler_->start();
  for (auto& r : threaded_) r->start();
  io_threads_.emplace_back([this] {
    pthread_setname_np(pthread_self(), "podscope-io");
    io_.run();
  });
  started_ = true;
  for (auto& component : components_) {
    if (absl::Status s = component->start(); !s.ok()) {
      return absl::Status(s.code(), std::string(component->name()) + ": " + std::string(s.message()));
    }
  }
  PODSCOPE_LOG(kInfo) << "podscope-agent listening grpc=" << with_port(config_.listen, grpc_port_)
                      << " metrics=" << with_port(config_.metrics_listen, metrics_port_) << " host=" << host_name_;
  return absl::OkStatus();
}

void Agent::shutdown() {
  if (stopped_) return;
  stopped_ = true;
  // The running capture is closed, gathered and answered; then the server drains what is in flight.
  captures_->shutdown(/*wait_ms=*/2000);
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  for (auto it = components_.rbegin(); it != components_.rend(); ++it) {
    if (started_) (*it)->stop();
  }
  for (auto& r : threaded_) r->stop();
  sampler_->stop();
  for (auto& t : periodic_) boost::asio::post(io_, [task = t.get()] { task->timer.cancel(); });
  work_.reset();
  io_.stop();
  for (auto& t : io_threads_) t.join();
  io_threads_.clear();
  exporter_.reset();
  if (server_ != nullptr) server_->Wait();
}

void Agent::reload(const AgentConfig& config) {
  auto warn_restart = [](std::string_view key, const std::string& before, const std::string& after) {
    if (before != after) {
      PODSCOPE_LOG(kWarning) << "reload: " << key << " changed from '" << before << "' to '" << after
                             << "'; takes effect after a restart";
    }
  };
  warn_restart("listen", config_.listen, config.listen);
  warn_restart("metrics_listen", config_.metrics_listen, config.metrics_listen);
  warn_restart("socket", config_.socket, config.socket);
  warn_restart("host_name", config_.host_name, config.host_name);
  warn_restart("clock_offset_ns", std::to_string(config_.clock_offset_ns), std::to_string(config.clock_offset_ns));
  if (absl::StatusOr<LogLevel> level = parse_log_level(config.log_level); level.ok()) set_log_level(*level);
  sampler_->set_interval(std::chrono::milliseconds(config.sample_interval_ms));
  captures_->set_limits({config.max_duration_ms, config.repository_root});
  config_.log_level = config.log_level;
  config_.sample_interval_ms = config.sample_interval_ms;
  config_.max_duration_ms = config.max_duration_ms;
  config_.repository_root = config.repository_root;
  PODSCOPE_LOG(kInfo) << "reloaded: sample_interval_ms=" << config.sample_interval_ms
                      << " max_duration_ms=" << config.max_duration_ms << " repository_root='"
                      << config.repository_root << "' log_level=" << config.log_level;
}

void Agent::fill_status(podscope::v1::AgentStatus& status) const {
  status.set_host_name(host_name_);
  status.set_version(PODSCOPE_VERSION);
  status.set_start_time_ns(start_time_ns_);
  auto add_collector = [&status](const Collector& c) {
    const CollectorState state = c.status();
    podscope::v1::CollectorStatus* s = status.add_collectors();
    s->set_name(std::string(c.name()));
    s->set_state(to_proto(state.state));
    s->set_reason(state.reason);
  };
  for (const auto& c : collectors_) add_collector(*c);
  for (const auto& r : threaded_) add_collector(r->collector());
  const ClockHealth clock = clock_health_->health();
  status.set_clock_synchronized(clock.synchronized);
  status.set_clock_detail(clock.detail);
  status.set_capture_session_id(captures_->running_session());
  status.add_capabilities("tensorflow.ProfilerService");
  status.add_capabilities("podscope.v1.Agent");
  for (const auto& contributor : status_contributors_) contributor(status);
}

}  // namespace podscope::agent
