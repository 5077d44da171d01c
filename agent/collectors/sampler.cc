#include "agent/collectors/sampler.h"

#include <pthread.h>

#include <ctime>

#include <boost/asio/post.hpp>

#include "daemon/host_metrics.h"

namespace podscope::agent {
namespace {
double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
constexpr std::array<const char*, 3> kStateNames = {"ok", "degraded", "unavailable"};
}  // namespace

CollectorStatusMetrics::CollectorStatusMetrics(prometheus::Registry& registry, const std::string& host_name)
    : family_(host_family<prometheus::Gauge>(
          registry, host_name, "podscope_collector_status",
          "1 for the state each collector is in (ok, degraded, unavailable); the agent's status says why.")) {}

void CollectorStatusMetrics::add(const Collector& collector) {
  std::lock_guard lock(mu_);
  Entry e{&collector, {}};
  for (size_t i = 0; i < 3; ++i) {
    e.by_state[i] = &family_.Add({{"collector", std::string(collector.name())}, {"state", kStateNames[i]}});
  }
  entries_.push_back(e);
}

void CollectorStatusMetrics::update() {
  std::lock_guard lock(mu_);
  for (Entry& e : entries_) {
    const auto state = static_cast<size_t>(e.collector->state());
    for (size_t i = 0; i < 3; ++i) e.by_state[i]->Set(i == state ? 1 : 0);
  }
}

Sampler::Sampler(boost::asio::io_context& io, const Clock& clock, SampleSink& sink, prometheus::Registry& registry,
                 const std::string& host_name, std::chrono::milliseconds interval)
    : timer_(io),
      clock_(clock),
      sink_(sink),
      status_metrics_(registry, host_name),
      passes_(host_counter(registry, host_name, "podscope_sampling_passes_total",
                           "Sampling passes run (periodic and at capture window edges).")),
      pass_seconds_(host_counter(registry, host_name, "podscope_sampling_pass_cpu_seconds_total",
                                 "CPU time spent in sampling passes.")),
      last_pass_seconds_(host_gauge(registry, host_name, "podscope_sampling_pass_last_cpu_seconds",
                                    "CPU time of the most recent sampling pass.")),
      interval_(interval) {}

void Sampler::add(Collector& collector) {
  collectors_.push_back(&collector);
  status_metrics_.add(collector);
}

int64_t Sampler::run_pass() {
  std::lock_guard lock(pass_mu_);
  const double cpu_before = thread_cpu_seconds();
  const int64_t now = clock_.now_ns();
  for (Collector* c : collectors_) c->sample(now, sink_);
  status_metrics_.update();
  const double cpu = thread_cpu_seconds() - cpu_before;
  passes_.Increment();
  pass_seconds_.Increment(cpu);
  last_pass_seconds_.Set(cpu);
  return now;
}

void Sampler::start() {
  stopped_ = false;
  next_ = std::chrono::steady_clock::now();
  schedule();
}

void Sampler::stop() {
  boost::asio::post(timer_.get_executor(), [this] {
    stopped_ = true;
    timer_.cancel();
  });
}

void Sampler::set_interval(std::chrono::milliseconds interval) {
  std::lock_guard lock(interval_mu_);
  interval_ = interval;
}

void Sampler::schedule() {
  {
    std::lock_guard lock(interval_mu_);
    next_ += interval_;
  }
  // A pass that overran (suspend, overload) skips ahead instead of running a burst of late passes.
  const auto now = std::chrono::steady_clock::now();
  if (next_ < now) next_ = now;
  timer_.expires_at(next_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    run_pass();
    schedule();
  });
}

ThreadedCollectorRunner::ThreadedCollectorRunner(std::unique_ptr<Collector> collector, std::chrono::milliseconds period,
                                                 const Clock& clock, SampleSink& sink)
    : collector_(std::move(collector)), period_(period), clock_(clock), sink_(sink) {}

ThreadedCollectorRunner::~ThreadedCollectorRunner() { stop(); }

void ThreadedCollectorRunner::start() {
  thread_ = std::thread([this] {
    // Named after the collector, so per-thread CPU (top -H, the agent bench) says which source costs what.
    const std::string thread_name = "col-" + std::string(collector_->name()).substr(0, 11);
    pthread_setname_np(pthread_self(), thread_name.c_str());
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      collector_->sample(clock_.now_ns(), sink_);
      lock.lock();
      cv_.wait_for(lock, period_, [this] { return stop_; });
    }
  });
}

void ThreadedCollectorRunner::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace podscope::agent
