// SlowStepDetector: judges each step of an annotated process against that process's own baseline, the median
// and the median absolute deviation (MAD) of its recent steps. A step is slow when it is longer than both
// `factor` × the median and the median + `spread_factor` × the MAD: the ratio alone fires on processes whose
// steps vary by nature, the spread alone on processes so regular that their MAD is nanoseconds.
//
// A process's first steps are not judged: until it has reported `min_steps` steps and `warmup_ns` has passed
// since its first one (start-up, connection set-up, the recorder switching annotation on: its first steps are
// slower for reasons nobody needs a snapshot of). Slow steps seen then are counted, not snapshot.
//
// Snapshots are rate-limited without ignoring what matters: after one, a cool-down starts for the whole agent
// (in synchronous training every core of every process sees the same slow step); inside it only a step at
// least kEscalation times slower, relative to its median, than every slow step seen since the cool-down began
// freezes another (and restarts the cool-down from it). Jitter that happened to start a cool-down cannot hide
// a real outlier, and jitter inside it raises the bar for itself: the slow steps that freeze snapshots are the
// records of what the host has shown, each at least twice the last.
//
// Fed on the local socket's thread with every step — a process annotating tiny steps sends hundreds of
// thousands a second — so a step costs a short lock and two binary searches in a sorted window, with no
// allocation once warm; the MAD is computed only for steps already past `factor` × the median.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "agent/steps/step_tracker.h"

namespace podscope::agent {

struct SlowStepSettings {
  double factor = 2.0;          // × the median
  double spread_factor = 10.0;  // × the MAD above the median
  int64_t min_steps = 20;
  int64_t warmup_ns = 2'000'000'000;
  int64_t cooldown_ns = 60'000'000'000;
  size_t history = 101;         // the baseline's window, per process
  size_t max_processes = 4096;  // beyond, the process silent longest is forgotten (pids are reused)
};

struct SlowStep {
  int32_t pid = 0;
  StepRecord step;
  int64_t step_ns = 0;
  int64_t median_ns = 0;
  int64_t mad_ns = 0;

  double ratio() const { return static_cast<double>(step_ns) / static_cast<double>(median_ns); }
};

struct SlowStepVerdict {
  enum class Kind {
    kNotSlow,
    kWarmingUp,    // slow, but its process is still warming up
    kCoolingDown,  // slow, but not kEscalation times slower than the slow steps seen in the cool-down
    kSnapshot,     // freezes a snapshot
  };
  Kind kind = Kind::kNotSlow;
  bool inside_cooldown = false;  // a kSnapshot that escalated past a cool-down
  SlowStep slow;                 // set unless kNotSlow
};

class SlowStepDetector {
 public:
  // Inside a cool-down a step must be this many times slower (relative to its median) than every slow step
  // seen since it began to freeze another snapshot.
  static constexpr double kEscalation = 2.0;

  explicit SlowStepDetector(SlowStepSettings settings) : settings_(settings) {}

  // A step of process `pid` (agent clock).
  SlowStepVerdict observe(int32_t pid, const StepRecord& step);
  const SlowStepSettings& settings() const { return settings_; }
  size_t processes() const;
  uint64_t processes_forgotten() const;

 private:
  // The last `history` step times of one process: in arrival order (a ring) and sorted (for the median).
  struct Window {
    std::vector<int64_t> ring;
    size_t next = 0;  // the ring's oldest entry once it is full
    std::vector<int64_t> sorted;
    int64_t first_end_ns = 0;
    int64_t last_end_ns = 0;
    int64_t seen = 0;
  };

  Window& window_of(int32_t pid, int64_t end_ns);
  void add(Window& w, int64_t step_ns) const;
  // The MAD of the window around `median` (`scratch_` holds the deviations).
  int64_t mad(const Window& w, int64_t median);
  bool warming_up(const Window& w, int64_t end_ns) const;
  // Whether a slow step of this ratio freezes a snapshot now; starts or restarts the cool-down when it does.
  bool admit(const SlowStep& slow, bool& inside_cooldown);

  const SlowStepSettings settings_;
  mutable std::mutex mu_;
  std::unordered_map<int32_t, Window> windows_;
  std::vector<int64_t> scratch_;
  uint64_t forgotten_ = 0;
  bool triggered_ = false;
  int64_t cooldown_from_ns_ = 0;   // the end of the step that started the cool-down, agent clock
  double cooldown_max_ratio_ = 0;  // the largest ratio to its median of a slow step seen since
};

}  // namespace podscope::agent
