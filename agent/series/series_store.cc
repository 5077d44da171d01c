#include "agent/series/series_store.h"

#include <algorithm>
#include <stdexcept>

#include "daemon/host_metrics.h"

namespace podscope::agent {
namespace {

// The family of `spec`'s metric, registered (with the host's label) by its first series.
template <typename Metric>
prometheus::Family<Metric>& family_of(prometheus::Family<Metric>*& family, const SeriesSpec& spec,
                                      const std::string& host_name, prometheus::Registry& registry) {
  if (family == nullptr) family = &host_family<Metric>(registry, host_name, spec.metric, spec.help);
  return *family;
}

}  // namespace

struct SeriesStore::Series {
  SeriesSpec spec;
  // A short lock per series: the writer holds it for one store, a capture reading a window for one copy.
  mutable std::mutex mu;
  std::vector<Sample> ring;
  uint64_t written = 0;  // samples ever recorded; the newest is at (written - 1) % ring.size()
  prometheus::Gauge* gauge = nullptr;
  prometheus::Counter* counter = nullptr;
  double last_total = 0;  // counters: the source's running total at the previous sample
  bool has_total = false;
};

SeriesStore::SeriesStore(prometheus::Registry& registry, std::string host_name, size_t ring_capacity)
    : registry_(registry),
      host_name_(std::move(host_name)),
      ring_capacity_(std::max<size_t>(ring_capacity, 4)),
      series_(new std::atomic<Series*>[kMaxSeries]) {
  for (size_t i = 0; i < kMaxSeries; ++i) series_[i].store(nullptr, std::memory_order_relaxed);
}

SeriesStore::~SeriesStore() {
  for (size_t i = 0; i < count_.load(); ++i) delete series_[i].load();
}

size_t SeriesStore::capacity_for(int64_t max_window_ms, int64_t interval_ms) {
  const int64_t per_window = max_window_ms / std::max<int64_t>(interval_ms, 1) + 1;
  // Captures longer than the ring keep their newest samples; the cap bounds memory (16 B a sample).
  return static_cast<size_t>(std::clamp<int64_t>(per_window + 16, 64, 65536));
}

SeriesId SeriesStore::declare(const SeriesSpec& spec) {
  std::lock_guard lock(declare_mu_);
  const size_t id = count_.load(std::memory_order_relaxed);
  if (id >= kMaxSeries) {
    throw std::length_error("series table full (" + std::to_string(kMaxSeries) + "), declaring " + spec.metric);
  }
  auto series = std::make_unique<Series>();
  series->spec = spec;
  series->ring.resize(ring_capacity_);
  std::map<std::string, std::string> labels(spec.labels.begin(), spec.labels.end());
  if (spec.kind == SeriesSpec::Kind::kGauge) {
    series->gauge = &family_of(gauge_families_[spec.metric], spec, host_name_, registry_).Add(labels);
  } else {
    series->counter = &family_of(counter_families_[spec.metric], spec, host_name_, registry_).Add(labels);
  }
  series_[id].store(series.release(), std::memory_order_release);
  count_.store(id + 1, std::memory_order_release);
  return static_cast<SeriesId>(id);
}

void SeriesStore::record(SeriesId id, int64_t time_ns, double value) {
  Series* s = series_[id].load(std::memory_order_acquire);
  {
    std::lock_guard lock(s->mu);
    s->ring[s->written % s->ring.size()] = {time_ns, value};
    ++s->written;
  }
  if (s->gauge != nullptr) {
    s->gauge->Set(value);
  } else {
    // Prometheus counters only go up: add what the source's total grew by. A source that restarted
    // (total went down) counts from its new total.
    const double delta = s->has_total ? value - s->last_total : value;
    s->counter->Increment(delta >= 0 ? delta : value);
    s->last_total = value;
    s->has_total = true;
  }
}

const SeriesSpec& SeriesStore::spec(SeriesId id) const { return series_[id].load(std::memory_order_acquire)->spec; }

void SeriesStore::window(SeriesId id, int64_t from_ns, int64_t to_ns, std::vector<Sample>& out) const {
  const Series* s = series_[id].load(std::memory_order_acquire);
  std::lock_guard lock(s->mu);
  const uint64_t n = std::min<uint64_t>(s->written, s->ring.size());
  for (uint64_t i = s->written - n; i < s->written; ++i) {
    const Sample& sample = s->ring[i % s->ring.size()];
    if (sample.time_ns >= from_ns && sample.time_ns <= to_ns) out.push_back(sample);
  }
}

bool SeriesStore::latest(SeriesId id, Sample& out) const {
  const Series* s = series_[id].load(std::memory_order_acquire);
  std::lock_guard lock(s->mu);
  if (s->written == 0) return false;
  out = s->ring[(s->written - 1) % s->ring.size()];
  return true;
}

}  // namespace podscope::agent
