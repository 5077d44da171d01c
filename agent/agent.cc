#include "agent/agent.h"

#include <climits>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/capture/capture_session.h"
#include "agent/collectors/sampler.h"
#include "agent/series/series_store.h"
#include "agent/service/agent_metrics.h"
#include "daemon/local_address.h"
#include "daemon/log.h"
#include "tls/credentials.h"

namespace podscope::agent {

// What the gRPC server may buffer for requests in flight, and the threads it serves them on (Monitors are held
// below this by max_concurrent_monitors, so a Profile always finds one).
constexpr size_t kGrpcMemoryQuotaBytes = 32u << 20;
constexpr int kGrpcMaxThreads = 64;
namespace {

// "0.0.0.0:0" with the bound port 41234 → "0.0.0.0:41234".
std::string with_port(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  return (colon == std::string::npos ? address : address.substr(0, colon)) + ":" + std::to_string(port);
}

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
  grpc_self_check_->start();
  started_ = true;
  for (auto& component : lifecycle_) {
    if (absl::Status s = component->start(); !s.ok()) {
      return absl::Status(s.code(), std::string(component->name()) + ": " + std::string(s.message()));
    }
  }
  PODSCOPE_LOG(kInfo) << "podscope-agent listening grpc=" << with_port(parts_.config.listen, parts_.grpc_port)
                      << " metrics=" << with_port(parts_.config.metrics_listen, metrics_port_)
                      << (plaintext_port_ != 0
                              ? " plaintext=" + with_port(parts_.config.tls.plaintext_listen, plaintext_port_)
                              : std::string())
                      << (parts_.config.tls.serves_tls() ? " tls" : "") << " host=" << parts_.host_name;
  return absl::OkStatus();
}

// The gRPC server with every service of the table (TLS as configured, and the plaintext loopback port when asked
// for), its self-check, and the metrics server.
absl::Status Agent::start_servers() {
  const tls::TlsConfig& tls = parts_.config.tls;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(parts_.config.listen, tls::server_credentials(tls), &parts_.grpc_port);
  if (!tls.plaintext_listen.empty()) {
    builder.AddListeningPort(tls.plaintext_listen, grpc::InsecureServerCredentials(), &plaintext_port_);
  }
  // A second agent on the same port must fail to start, not share the traffic (gRPC sets SO_REUSEPORT by default).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Requests are small; a large one is refused from its declared length. The quota bounds what gRPC buffers for
  // requests in flight (a receive limit alone still buffers the whole message first) and the threads it runs them
  // on. A long capture's XSpace can pass 1 GiB: responses may be as large as gRPC can carry.
  builder.SetMaxReceiveMessageSize(static_cast<int>(parts_.config.max_request_mb << 20));
  builder.SetMaxSendMessageSize(INT_MAX);
  grpc::ResourceQuota quota("podscope-agent");
  quota.Resize(kGrpcMemoryQuotaBytes);
  quota.SetMaxThreads(kGrpcMaxThreads);
  builder.SetResourceQuota(quota);
  for (const auto& service : services_) builder.RegisterService(service.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || parts_.grpc_port == 0) {
    server_.reset();
    return absl::UnavailableError("listen " + parts_.config.listen +
                                  ": cannot bind the gRPC port (in use or bad address)");
  }
  if (!tls.plaintext_listen.empty() && plaintext_port_ == 0) {
    return absl::UnavailableError("plaintext_listen " + tls.plaintext_listen + ": cannot bind (in use or bad address)");
  }
  const prometheus::Labels host_label{{"host", parts_.host_name}};
  tls_metrics_ = std::make_unique<tls::TlsMetrics>(tls, with_port(parts_.config.listen, parts_.grpc_port),
                                                   *parts_.registry, host_label);
  grpc_self_check_ = std::make_unique<GrpcSelfCheck>(
      GrpcSelfCheck::Settings{.target = local_address(parts_.config.listen, parts_.grpc_port),
                              .credentials = tls::channel_credentials(tls, tls::ServerVerification::kSkipForOwnPort)},
      parts_.clock, *parts_.registry, host_label);
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics_server =
      MetricsServer::start(parts_.config.metrics_listen, parts_.registry, {grpc_self_check_.get()}, host_label);
  if (!metrics_server.ok()) return metrics_server.status();
  metrics_server_ = std::move(*metrics_server);
  metrics_port_ = metrics_server_->port();
  return absl::OkStatus();
}

void Agent::shutdown() {
  if (stopped_) return;
  stopped_ = true;
  // A server that is shutting down answers NOT_SERVING: that is no failure of the port.
  if (grpc_self_check_ != nullptr) grpc_self_check_->stop();
  // The running capture is closed, gathered and answered; then the server drains what is in flight.
  parts_.captures->shutdown(/*wait_ms=*/2000);
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
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
  metrics_server_.reset();
  if (server_ != nullptr) server_->Wait();
}

void Agent::refuse_reload(std::string_view reason) {
  PODSCOPE_LOG(kError) << "reload refused, keeping the running config: " << reason;
  parts_.request_metrics->reloads_refused.Increment();
}

void Agent::reload(const AgentConfig& config) {
  AgentConfig reread = config;
  OptionSet running, fresh;
  declare_agent_options(parts_.config, running);
  declare_agent_options(reread, fresh);
  const ReloadOutcome outcome = reload_options(running, fresh);
  for (const ReloadOutcome::Change& c : outcome.refused) {
    PODSCOPE_LOG(kWarning) << "reload: " << c.key << " changed from '" << c.before << "' to '" << c.after
                           << "'; refused, the running value stays: it takes effect after a restart";
    parts_.request_metrics->reload_options_refused.Increment();
  }
  // The options declared Reload::kApplied, now in parts_.config, put in force.
  const AgentConfig& in_force = parts_.config;
  if (absl::StatusOr<LogLevel> level = parse_log_level(in_force.log_level); level.ok()) set_log_level(*level);
  parts_.sampler->set_interval(std::chrono::milliseconds(in_force.sample_interval_ms));
  parts_.captures->set_limits(capture_limits(in_force));
  std::string applied;
  for (const ReloadOutcome::Change& c : outcome.applied) {
    applied += " " + c.key + "=" + c.after;
    if (c.key == "repository_root") {
      PODSCOPE_LOG(kWarning) << "reload: captures are written under repository_root '" << c.after
                             << "'; triggered snapshots stay under '" << c.before << "' until a restart";
    }
  }
  PODSCOPE_LOG(kInfo) << "reloaded:" << (applied.empty() ? " nothing changed" : applied) << " ("
                      << outcome.refused.size() << " changed options refused)";
}

}  // namespace podscope::agent
