// SlowStepDetector: judges each step of an annotated process against that process's own baseline, the median
// and the median absolute deviation (MAD) of its recent steps. A step is slow when it is longer than both
// `factor` × the median and the median + `spread_factor` × the MAD: the ratio alone fires on processes whose
// steps vary by nature, the spread alone on processes so regular that their MAD is nanoseconds. It must also be
// `min_excess_ns` longer than the median: a process of sub-millisecond steps is regular enough for one
// preemption or page-fault burst to pass both (0.4-0.6 ms more than a 0.28 ms median, 2-3x and 40+ MADs, on a
// 16-core host just past the warm-up), and a snapshot of such a stall shows nothing a user can act on.
//
// A process's first steps are not judged: until it has reported `min_steps` steps and `warmup_ns` has passed
// since its first one (start-up, connection set-up, the recorder switching annotation on: its first steps are
// slower for reasons nobody needs a snapshot of). Slow steps seen then are counted, not snapshot.
//
// A process's warm-up also shows how much the host stalls it (start-up: page faults, connections, the recorder
// switching annotation on, a scheduler still placing the new threads): for a cool-down after any warm-up, a slow
// step must be kEscalation times slower, relative to its median, than every slow step seen while warming up, or it
// is counted below the bar. Fresh trainers on a 16-core host, once past a 2 s warm-up, spent the whole budget on
// stalls of 1.4-13 ms within 3 s (3 of 3 runs), as loud as those of their warm-up; a real slow step is louder.
//
// Snapshots are rate-limited by a budget, not by ignoring slow steps: up to kBudget of them at once, one more
// back every `cooldown_ns`. A slow step within `same_spell_ns` of the last snapshot's is inside that snapshot's
// span (in synchronous training every core of every process sees the same slow step: the first view freezes
// one, the others are covered by it). Past the budget a slow step still freezes a snapshot when it is at least
// kEscalation times slower, relative to its median, than every slow step any process showed in the last
// `cooldown_ns` (warm-up steps aside): a host that stalls all the time spends the budget on its first stalls and
// is then held to records of what it has shown, while a real outlier after a snapshot of noise is caught by the
// budget left. Slow steps neither admits are counted by the caller (kBelowBar, kCovered), never queued.
//
// Fed on the local socket's thread with every step — a process annotating tiny steps sends hundreds of
// thousands a second — so a step costs a short lock and two binary searches in a sorted window, with no
// allocation once warm; the MAD is computed only for steps already past `factor` × the median.
#pragma once

#include <climits>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "agent/steps/step_tracker.h"

namespace podscope::agent {

struct SlowStepSettings {
  double factor = 2.0;                // × the median
  double spread_factor = 10.0;        // × the MAD above the median
  int64_t min_excess_ns = 1'000'000;  // ... and at least this much above the median
  int64_t min_steps = 20;
  int64_t warmup_ns = 2'000'000'000;
  int64_t cooldown_ns = 60'000'000'000;  // one snapshot of the budget back every this long (0: no budget)
  int64_t same_spell_ns = 0;             // a slow step this close to the last snapshot's is inside its span
  size_t history = 101;                  // the baseline's window, per process
  size_t max_processes = 4096;           // beyond, the process silent longest is forgotten (pids are reused)
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
    kWarmingUp,  // slow, but its process is still warming up
    kBelowBar,   // slow, past the budget, and not kEscalation times slower than the slow steps of the last cool-down
    kCovered,    // slow, within same_spell_ns of the last snapshot's slow step: that snapshot holds it
    kSnapshot,   // freezes a snapshot
  };
  Kind kind = Kind::kNotSlow;
  bool inside_cooldown = false;  // a kSnapshot within the cool-down of an earlier snapshot
  SlowStep slow;                 // set unless kNotSlow
};

class SlowStepDetector {
 public:
  // Snapshots that may be frozen at once; one comes back every cool-down.
  static constexpr double kBudget = 3;
  // Past the budget, a slow step must be this many times slower (relative to its median) than every slow step of
  // the last cool-down to freeze a snapshot.
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
  // kSnapshot, kCovered or kBelowBar; the step raises the bar whatever it is.
  SlowStepVerdict::Kind admit(const SlowStep& slow, bool& inside_cooldown);
  // The budget as of `end_ns`: what came back since it was last refilled.
  void refill(int64_t end_ns);

  // The largest ratio of the slow steps recorded within about a cool-down around a time (the slices' resolution):
  // a sliding maximum in constant memory, the slowest of each of the last kSlices slices of the cool-down.
  class RecentMax {
   public:
    double around(int64_t end_ns, int64_t cooldown_ns) const;
    void record(int64_t end_ns, double ratio, int64_t cooldown_ns);

   private:
    static constexpr int64_t kSlices = 8;
    struct Slice {
      int64_t index = -1;  // end_ns / slice length
      double max_ratio = 0;
    };
    Slice slices_[kSlices];
  };

  const SlowStepSettings settings_;
  mutable std::mutex mu_;
  std::unordered_map<int32_t, Window> windows_;
  std::vector<int64_t> scratch_;
  uint64_t forgotten_ = 0;
  RecentMax slow_steps_;  // the slow steps of processes past their warm-up: the bar past the budget
  RecentMax warming_up_;  // the slow steps of processes warming up: the bar within it
  bool triggered_ = false;
  int64_t last_snapshot_end_ns_ = 0;  // agent clock
  double budget_ = kBudget;
  int64_t refilled_at_ns_ = INT64_MIN;  // agent clock; before the first slow step: never
};

}  // namespace podscope::agent
