// The glue every /proc collector shares: one read of its file per pass, its state (unavailable while the file is
// missing, degraded while it cannot be read or parsed, ok after a pass that recorded), and the pass itself. A
// collector only parses what it read and records its samples.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "agent/collectors/collector.h"
#include "agent/collectors/proc_text.h"

namespace podscope::agent {

class ProcFileCollector : public Collector {
 public:
  CollectorState status() const override { return state_.get(); }
  CollectorState::State state() const override { return state_.state(); }
  void sample(int64_t now_ns, SampleSink& sink) final;

 protected:
  explicit ProcFileCollector(std::string path) : file_(std::move(path)) {}
  const std::string& path() const { return file_.path(); }
  // One read of the file: a parse error is returned before anything is recorded (the pass leaves the collector
  // degraded); otherwise its samples go to `sink`.
  virtual absl::Status record(std::string_view text, int64_t now_ns, SampleSink& sink) = 0;

 private:
  ProcFile file_;
  CollectorStateCell state_;
};

// The N series of each named thing a /proc file lists (a disk, a network interface), declared in the first pass that
// finds it: `spec(m, name)` is the spec of its m-th series.
template <size_t N>
class SeriesByName {
 public:
  template <typename Spec>
  const std::array<SeriesId, N>& of(std::string_view name, SampleSink& sink, Spec spec) {
    for (const Entry& e : entries_) {
      if (e.name == name) return e.ids;
    }
    Entry& added = entries_.emplace_back();
    added.name = std::string(name);
    for (size_t m = 0; m < N; ++m) added.ids[m] = sink.declare(spec(m, added.name));
    return added.ids;
  }

 private:
  struct Entry {
    std::string name;
    std::array<SeriesId, N> ids{};
  };
  std::vector<Entry> entries_;
};

}  // namespace podscope::agent
