// The collector interface: one collector per source of host or device counters (one file each), sampled
// on the agent's period. Collectors know nothing of gRPC, Prometheus or XSpace: they write samples into a
// SampleSink, which keeps a ring per series, mirrors it into the Prometheus registry and hands windows of
// it to captures.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace podscope::agent {

// One number over time.
struct SeriesSpec {
  enum class Kind { kGauge, kCounter };
  std::string metric;  // Prometheus family name in base units, e.g. "podscope_cpu_seconds_total"
  std::string help;
  Kind kind = Kind::kGauge;
  std::vector<std::pair<std::string, std::string>> labels{};  // the agent adds `host` itself
  // Where the series goes in captures: the plane ("/host:CPU", "/device:GPU:0") and the counter track's
  // name on that plane's `_counters_` line. An empty track keeps the series out of captures.
  std::string plane{};
  std::string track{};
};

using SeriesId = uint32_t;

class SampleSink {
 public:
  virtual ~SampleSink() = default;
  // Declares a series once, the first time a collector sees it; the id is used for every later sample.
  // Not for the steady state: it may allocate.
  virtual SeriesId declare(const SeriesSpec& spec) = 0;
  // Records a sample. For counters, `value` is the running total as read from the source.
  virtual void record(SeriesId id, int64_t time_ns, double value) = 0;
};

struct CollectorState {
  enum class State { kOk, kDegraded, kUnavailable };
  State state = State::kOk;
  // Why degraded or unavailable, without the state word, e.g. "cannot load libnvidia-ml.so.1: ...".
  // describe() adds the state word; status readers (CLI) show the state next to it.
  std::string reason;
};

// "ok", "degraded: <reason>" or "unavailable: <reason>": the one place that words a state for people
// (capture warnings, logs).
inline std::string describe(const CollectorState& s) {
  switch (s.state) {
    case CollectorState::State::kOk: return "ok";
    case CollectorState::State::kDegraded: return "degraded: " + s.reason;
    case CollectorState::State::kUnavailable: return "unavailable: " + s.reason;
  }
  return s.reason;
}

// Thread-safe holder for a collector's state: sample() writes it, status readers (gRPC, metrics) read it.
class CollectorStateCell {
 public:
  void set(CollectorState::State state, std::string reason = {}) {
    std::lock_guard lock(mu_);
    if (state_.state == state && state_.reason == reason) return;  // no allocation in the steady state
    state_ = {state, std::move(reason)};
  }
  CollectorState get() const {
    std::lock_guard lock(mu_);
    return state_;
  }
  CollectorState::State state() const {  // without copying the reason: no allocation
    std::lock_guard lock(mu_);
    return state_.state;
  }

 private:
  mutable std::mutex mu_;
  CollectorState state_;
};

class Collector {
 public:
  virtual ~Collector() = default;
  virtual std::string_view name() const = 0;
  virtual CollectorState status() const = 0;  // thread-safe
  // Just the state, read by every sampling pass for podscope_collector_status. Collectors with a
  // CollectorStateCell override it with `state_.state()` so that reading it never copies the reason.
  virtual CollectorState::State state() const { return status().state; }
  // One sampling pass. Must not allocate in the steady state and must not block for long: a collector
  // whose source can block (NVML, a remote metric service) runs on its own thread.
  virtual void sample(int64_t now_ns, SampleSink& sink) = 0;
};

}  // namespace podscope::agent
