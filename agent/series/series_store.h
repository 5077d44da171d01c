// SeriesStore: the agent's SampleSink. Each series keeps a fixed-size ring of (time, value) samples with a
// single writer (the collector that declared it) and no allocation after declare(); every record() also
// updates the series' Prometheus metric, so a scrape only serializes. Captures read the samples of a window.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "agent/collectors/collector.h"

namespace podscope::agent {

struct Sample {
  int64_t time_ns = 0;
  double value = 0;
};

class SeriesStore final : public SampleSink {
 public:
  // Every metric gets the constant label host=`host_name`; each ring holds `ring_capacity` samples.
  SeriesStore(prometheus::Registry& registry, std::string host_name, size_t ring_capacity);
  ~SeriesStore() override;

  SeriesId declare(const SeriesSpec& spec) override;
  void record(SeriesId id, int64_t time_ns, double value) override;

  size_t size() const { return count_.load(std::memory_order_acquire); }
  size_t ring_capacity() const { return ring_capacity_; }
  const SeriesSpec& spec(SeriesId id) const;
  // The samples of series `id` with from_ns <= time <= to_ns, oldest first (appended to `out`).
  void window(SeriesId id, int64_t from_ns, int64_t to_ns, std::vector<Sample>& out) const;
  // The newest sample, if any.
  bool latest(SeriesId id, Sample& out) const;

  // Enough room for a window of `max_window_ms` at `interval_ms`, plus the open/close samples and slack.
  static size_t capacity_for(int64_t max_window_ms, int64_t interval_ms);

 private:
  struct Series;
  static constexpr size_t kMaxSeries = 16384;

  prometheus::Registry& registry_;
  std::string host_name_;
  size_t ring_capacity_;
  std::mutex declare_mu_;  // declare() only; record() never takes it
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauge_families_;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counter_families_;
  std::unique_ptr<std::atomic<Series*>[]> series_;  // fixed table: record() reads it without a lock
  std::atomic<size_t> count_{0};
};

}  // namespace podscope::agent
