#include "agent/agent.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/capture/capture_session.h"
#include "agent/capture/pod_sessions.h"
#include "agent/collectors/sampler.h"
#include "agent/series/series_store.h"
#include "agent/service/agent_metrics.h"
#include "daemon/atomic_file.h"
#include "daemon/log.h"

namespace podscope::agent {

namespace {

template <typename... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
// Clang before 17 does not deduce an aggregate's template arguments from its initializers (the instrumented
// build uses Debian 12's clang, 14).
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
  sweep_repository();
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

// The local directories remote requests write into: the repository root, and where captures whose upload into a
// bucket failed are kept. (An upload into a bucket cut off by a kill is never an object: what the service holds of
// it is an incomplete multipart or resumable upload, which the bucket's lifecycle rules clear.)
void Agent::sweep_repository() {
  for (const std::string& root : {parts_.config.repository_root, parts_.config.failed_uploads_directory}) {
    if (root.empty()) continue;
    const SweptWrites swept = sweep_interrupted_writes(root);
    if (swept.files == 0) continue;
    parts_.request_metrics->interrupted_writes_removed.Increment(static_cast<double>(swept.files));
    parts_.request_metrics->interrupted_writes_removed_bytes.Increment(static_cast<double>(swept.bytes));
    PODSCOPE_LOG(kWarning) << "removed " << swept.files << " temporary files (" << swept.bytes / 1024
                           << " KiB) of writes a crash or kill cut off under " << root << ", and " << swept.directories
                           << " directories that held nothing else";
  }
}

// The gRPC server with every service of the table, its self-check and the metrics server.
absl::Status Agent::start_servers() {
  std::vector<grpc::Service*> services;
  for (const auto& service : services_) services.push_back(service.get());
  front_door::DaemonServerSettings settings{.listen = parts_.config.listen,
                                            .metrics_listen = parts_.config.metrics_listen,
                                            .metrics_web_config = parts_.config.metrics_web_config,
                                            .tls = parts_.config.tls,
                                            .max_request_bytes = static_cast<size_t>(parts_.config.max_request_mb)
                                                                 << 20,
                                            .services = std::move(services),
                                            .labels = {{"host", parts_.host_name}}};
  absl::StatusOr<std::unique_ptr<front_door::DaemonServers>> servers =
      front_door::DaemonServers::start(std::move(settings), parts_.clock, parts_.registry);
  if (!servers.ok()) return servers.status();
  servers_ = std::move(*servers);
  parts_.grpc_port = servers_->grpc_port();
  return absl::OkStatus();
}

void Agent::shutdown() {
  if (stopped_) return;
  stopped_ = true;
  // The running capture is closed, gathered and answered, a pod session cancelled; then the server drains what is in
  // flight.
  if (parts_.pod_sessions != nullptr) parts_.pod_sessions->stop();
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
