// SlowStepDetector: per annotated process, the rolling median of its recent step times; a step longer than
// `factor` × that median (once `min_steps` were seen) is a slow step, at most one per cool-down for the whole
// agent (in synchronous training every core of every process sees the same slow step). Fed on the local
// socket's thread with every step — a process annotating tiny steps sends hundreds of thousands a second — so
// a step costs a short lock and two binary searches in a sorted window, with no allocation once warm.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "agent/steps/step_tracker.h"

namespace podscope::agent {

struct SlowStepSettings {
  double factor = 2.0;
  int64_t min_steps = 20;
  int64_t cooldown_ns = 60'000'000'000;
  size_t history = 101;         // the median's window, per process
  size_t max_processes = 4096;  // beyond, the process silent longest is forgotten (pids are reused)
};

struct SlowStep {
  int32_t pid = 0;
  StepRecord step;
  int64_t step_ns = 0;
  int64_t median_ns = 0;
};

class SlowStepDetector {
 public:
  explicit SlowStepDetector(SlowStepSettings settings) : settings_(settings) {}

  // A step of process `pid` (agent clock); the slow step when it triggers.
  std::optional<SlowStep> observe(int32_t pid, const StepRecord& step);
  const SlowStepSettings& settings() const { return settings_; }
  size_t processes() const;
  uint64_t processes_forgotten() const;

 private:
  // The last `history` step times of one process: in arrival order (a ring) and sorted (for the median).
  struct Window {
    std::vector<int64_t> ring;
    size_t next = 0;  // the ring's oldest entry once it is full
    std::vector<int64_t> sorted;
    int64_t last_end_ns = 0;
  };

  Window& window_of(int32_t pid, int64_t end_ns);
  void add(Window& w, int64_t step_ns) const;

  const SlowStepSettings settings_;
  mutable std::mutex mu_;
  std::unordered_map<int32_t, Window> windows_;
  uint64_t forgotten_ = 0;
  std::optional<int64_t> last_trigger_ns_;  // a step's end, agent clock
};

}  // namespace podscope::agent
