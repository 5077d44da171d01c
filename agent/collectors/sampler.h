// Sampler: runs the sampling pass — every registered collector, in order, into the SeriesStore — on the
// agent's period (an Asio timer), and on demand when a capture window opens or closes. Collectors whose
// source can block run in a ThreadedCollectorRunner instead, so they never stall this pass.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "agent/collectors/collector.h"
#include "daemon/clock.h"

namespace podscope::agent {

// Publishes each collector's state as podscope_collector_status{collector,state} (1 for the current one).
class CollectorStatusMetrics {
 public:
  explicit CollectorStatusMetrics(prometheus::Registry& registry, const std::string& host_name);
  void add(const Collector& collector);
  void update();  // no allocation while states stay put (reasons are only copied when non-empty)

 private:
  prometheus::Family<prometheus::Gauge>& family_;
  struct Entry {
    const Collector* collector;
    std::array<prometheus::Gauge*, 3> by_state;
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
};

class Sampler {
 public:
  Sampler(boost::asio::io_context& io, const Clock& clock, SampleSink& sink, prometheus::Registry& registry,
          const std::string& host_name, std::chrono::milliseconds interval);

  void add(Collector& collector);  // before start()
  CollectorStatusMetrics& status_metrics() { return status_metrics_; }
  void start();
  void stop();
  void set_interval(std::chrono::milliseconds interval);
  // One pass on the calling thread (serialized with the periodic ones); returns its time stamp.
  int64_t run_pass();

 private:
  void schedule();

  boost::asio::steady_timer timer_;
  const Clock& clock_;
  SampleSink& sink_;
  std::vector<Collector*> collectors_;
  CollectorStatusMetrics status_metrics_;
  prometheus::Counter& passes_;
  prometheus::Counter& pass_seconds_;
  prometheus::Gauge& last_pass_seconds_;
  std::mutex pass_mu_;  // one pass at a time: each series keeps a single writer
  std::mutex interval_mu_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point next_;
  bool stopped_ = true;
};

// Samples one collector on its own thread and period (NVML, remote metric services).
class ThreadedCollectorRunner {
 public:
  ThreadedCollectorRunner(std::unique_ptr<Collector> collector, std::chrono::milliseconds period, const Clock& clock,
                          SampleSink& sink);
  ~ThreadedCollectorRunner();
  Collector& collector() { return *collector_; }
  void start();
  void stop();

 private:
  std::unique_ptr<Collector> collector_;
  std::chrono::milliseconds period_;
  const Clock& clock_;
  SampleSink& sink_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace podscope::agent
