// The glue every /proc collector shares: one read of its file per pass, its state (unavailable while the file is
// missing, degraded while it cannot be read or parsed, ok after a pass that recorded), and the pass itself. A
// collector only parses what it read and records its samples.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

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

}  // namespace podscope::agent
