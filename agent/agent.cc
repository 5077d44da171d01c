#include "agent/agent.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/capture/capture_session.h"
#include "agent/collectors/sampler.h"
#include "agent/series/series_store.h"
#include "agent/service/agent_metrics.h"
#include "daemon/log.h"

namespace podscope::agent {

namespace {

template <typename... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
// Clang before 17 does not deduce an aggregate's template arguments from its initializers (the instrumented
// build uses clang 14).
template <typename... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace

Agent::Agent(const AgentConfig& config) : parts_(config), work_(boost::asio::make_work_guard(parts_.io)) {
  for (const ComponentEntry& entry : agent_components()) build(entry);
}

Agent::~Agent() { shutdown(); }

// Makes the entry's component and hands it to what runs its kind.
void Agent::build(const ComponentEntry& entry) {
  bool built = true;
  std::visit(Overloaded{
                 [&](MakePassCollectors make) {
                   for (std::unique_ptr<Collector>& collector : make(parts_)) {
                     parts_.sampler->add(*collector);
                     parts_.collectors.push_back(collector.get());
                     collectors_.push_back(std::move(collector));
                   }
                 },
                 [&](MakeThreadedCollector make) {
                   ThreadedCollector threaded = make(parts_);
                   parts_.sampler->status_metrics().add(*threaded.collector);
                   parts_.collectors.push_back(threaded.collector.get());
                   threaded_.push_back(std::make_unique<ThreadedCollectorRunner>(
                       std::move(threaded.collector), threaded.period, parts_.clock, *parts_.series));
                 },
                 [&](MakeCaptureSource make) {
                   std::unique_ptr<CaptureSource> source = make(parts_);
                   built = source != nullptr;
                   if (!built) return;
                   parts_.captures->add_source(*source);
                   sources_.push_back(std::move(source));
                 },
                 [&](MakeGrpcService make) { services_.push_back(make(parts_)); },
                 [&](MakeLifecycleComponent make) {
                   std::unique_ptr<LifecycleComponent> component = make(parts_);
                   built = component != nullptr;
                   if (built) lifecycle_.push_back(std::move(component));
                 },
             },
             entry.make);
  PODSCOPE_LOG(kDebug) << "component " << entry.name << (built ? "" : " (not configured)") << ": " << entry.what;
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
  periodic_.push_back(std::make_unique<PeriodicTask>(parts_.io, period, std::move(tick)));
  periodic_.back()->arm();
}

absl::Status Agent::start() {
  if (absl::Status s = start_servers(); !s.ok()) return s;
  parts_.sampler->run_pass();  // metrics and rates have a first point before the first period ends
  parts_.sampler->start();
  for (auto& r : threaded_) r->start();
  io_threads_.emplace_back([this] {
    pthread_setname_np(pthread_self(), "podscope-io");
    parts_.io.run();
  });
  started_ = true;
  for (auto& component : lifecycle_) {
    if (absl::Status s = component->start(); !s.ok()) {
      return absl::Status(s.code(), std::string(component->name()) + ": " + std::string(s.message()));
    }
  }
  PODSCOPE_LOG(kInfo) << "podscope-agent listening " << servers_->listening() << " host=" << parts_.host_name;
  return absl::OkStatus();
}

// The gRPC server with every service of the table, its self-check and the metrics server.
absl::Status Agent::start_servers() {
  std::vector<grpc::Service*> services;
  for (const auto& service : services_) services.push_back(service.get());
  tls::DaemonServerSettings settings{.listen = parts_.config.listen,
                                     .metrics_listen = parts_.config.metrics_listen,
                                     .tls = parts_.config.tls,
                                     .max_request_bytes = static_cast<size_t>(parts_.config.max_request_mb) << 20,
                                     .services = std::move(services),
                                     .labels = {{"host", parts_.host_name}}};
  absl::StatusOr<std::unique_ptr<tls::DaemonServers>> servers =
      tls::DaemonServers::start(std::move(settings), parts_.clock, parts_.registry);
  if (!servers.ok()) return servers.status();
  servers_ = std::move(*servers);
  parts_.grpc_port = servers_->grpc_port();
  return absl::OkStatus();
}

void Agent::shutdown() {
  if (stopped_) return;
  stopped_ = true;
  // The running capture is closed, gathered and answered; then the server drains what is in flight.
  parts_.captures->shutdown(/*wait_ms=*/2000);
  if (servers_ != nullptr) servers_->shutdown(std::chrono::milliseconds(500));
  for (auto it = lifecycle_.rbegin(); it != lifecycle_.rend(); ++it) {
    if (started_) (*it)->stop();
  }
  for (auto& r : threaded_) r->stop();
  parts_.sampler->stop();
  for (auto& t : periodic_) boost::asio::post(parts_.io, [task = t.get()] { task->timer.cancel(); });
  work_.reset();
  parts_.io.stop();
  for (auto& t : io_threads_) t.join();
  io_threads_.clear();
  servers_.reset();
}

void Agent::refuse_reload(std::string_view reason) {
  PODSCOPE_LOG(kError) << "reload refused, keeping the running config: " << reason;
  parts_.request_metrics->reloads_refused.Increment();
}

void Agent::reload(const AgentConfig& config) {
  auto warn_restart = [](std::string_view key, const std::string& before, const std::string& after) {
    if (before != after) {
      PODSCOPE_LOG(kWarning) << "reload: " << key << " changed from '" << before << "' to '" << after
                             << "'; takes effect after a restart";
    }
  };
  warn_restart("listen", parts_.config.listen, config.listen);
  warn_restart("metrics_listen", parts_.config.metrics_listen, config.metrics_listen);
  warn_restart("socket", parts_.config.socket, config.socket);
  warn_restart("host_name", parts_.config.host_name, config.host_name);
  auto joined = [](const std::vector<std::string>& list) {
    std::string out;
    for (const std::string& item : list) out += (out.empty() ? "" : ",") + item;
    return out;
  };
  warn_restart("allowed_fanout_targets", joined(parts_.config.allowed_fanout_targets),
               joined(config.allowed_fanout_targets));
  warn_restart("clock_offset_ns", std::to_string(parts_.config.clock_offset_ns),
               std::to_string(config.clock_offset_ns));
  // The TLS files themselves are re-read every tls_refresh_s; which files, and who may capture, need a restart.
  const tls::TlsConfig& tls = parts_.config.tls;
  warn_restart("tls_cert", tls.cert, config.tls.cert);
  warn_restart("tls_key", tls.key, config.tls.key);
  warn_restart("tls_client_ca", tls.client_ca, config.tls.client_ca);
  warn_restart("tls_ca", tls.ca, config.tls.ca);
  warn_restart("allowed_clients", joined(tls.allowed_clients), joined(config.tls.allowed_clients));
  warn_restart("plaintext_listen", tls.plaintext_listen, config.tls.plaintext_listen);
  if (absl::StatusOr<LogLevel> level = parse_log_level(config.log_level); level.ok()) set_log_level(*level);
  parts_.sampler->set_interval(std::chrono::milliseconds(config.sample_interval_ms));
  parts_.captures->set_limits(capture_limits(config));
  parts_.config.log_level = config.log_level;
  parts_.config.sample_interval_ms = config.sample_interval_ms;
  parts_.config.max_duration_ms = config.max_duration_ms;
  parts_.config.repository_root = config.repository_root;
  parts_.config.capture_memory_limit_mb = config.capture_memory_limit_mb;
  PODSCOPE_LOG(kInfo) << "reloaded: sample_interval_ms=" << config.sample_interval_ms
                      << " max_duration_ms=" << config.max_duration_ms << " repository_root='" << config.repository_root
                      << "' capture_memory_limit_mb=" << config.capture_memory_limit_mb
                      << " log_level=" << config.log_level;
}

}  // namespace podscope::agent
