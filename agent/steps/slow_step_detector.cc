#include "agent/steps/slow_step_detector.h"

#include <algorithm>

namespace podscope::agent {

SlowStepVerdict SlowStepDetector::observe(int32_t pid, const StepRecord& step) {
  SlowStepVerdict verdict;
  int64_t step_ns = 0;
  if (__builtin_sub_overflow(step.end_ns, step.begin_ns, &step_ns) || step_ns <= 0) return verdict;
  std::lock_guard lock(mu_);
  Window& w = window_of(pid, step.end_ns);
  if (static_cast<int64_t>(w.sorted.size()) >= std::min<int64_t>(settings_.min_steps, settings_.history)) {
    const int64_t median = std::max<int64_t>(w.sorted[w.sorted.size() / 2], 1);
    if (static_cast<double>(step_ns) > settings_.factor * static_cast<double>(median)) {
      const int64_t spread = mad(w, median);
      const int64_t excess = step_ns - median;
      if (excess >= settings_.min_excess_ns &&
          static_cast<double>(excess) > settings_.spread_factor * static_cast<double>(spread)) {
        verdict.slow = SlowStep{pid, step, step_ns, median, spread};
        if (warming_up(w, step.end_ns)) {
          verdict.kind = SlowStepVerdict::Kind::kWarmingUp;
          warming_up_.record(step.end_ns, verdict.slow.ratio(), settings_.cooldown_ns);
        } else {
          verdict.kind = admit(verdict.slow, verdict.inside_cooldown);
        }
      }
    }
  }
  add(w, step_ns);
  ++w.seen;
  return verdict;
}

bool SlowStepDetector::warming_up(const Window& w, int64_t end_ns) const {
  return w.seen < settings_.min_steps || end_ns - w.first_end_ns < settings_.warmup_ns;
}

SlowStepVerdict::Kind SlowStepDetector::admit(const SlowStep& slow, bool& inside_cooldown) {
  const int64_t end = slow.step.end_ns;
  const double past_budget_bar = kEscalation * slow_steps_.around(end, settings_.cooldown_ns);
  const double warm_up_bar = kEscalation * warming_up_.around(end, settings_.cooldown_ns);
  slow_steps_.record(end, slow.ratio(), settings_.cooldown_ns);
  // Either side: another process's view of a step may end a little earlier.
  const int64_t since = end > last_snapshot_end_ns_ ? end - last_snapshot_end_ns_ : last_snapshot_end_ns_ - end;
  if (triggered_ && since <= settings_.same_spell_ns) return SlowStepVerdict::Kind::kCovered;
  refill(end);
  const bool within_budget = settings_.cooldown_ns <= 0 || budget_ >= 1;
  if (slow.ratio() < (within_budget ? warm_up_bar : past_budget_bar)) return SlowStepVerdict::Kind::kBelowBar;
  budget_ = std::max(budget_ - 1, 0.0);
  inside_cooldown = triggered_ && since < settings_.cooldown_ns;
  triggered_ = true;
  last_snapshot_end_ns_ = end;
  return SlowStepVerdict::Kind::kSnapshot;
}

void SlowStepDetector::refill(int64_t end_ns) {
  if (settings_.cooldown_ns <= 0) return;
  if (refilled_at_ns_ != INT64_MIN && end_ns > refilled_at_ns_) {
    const double elapsed = static_cast<double>(end_ns) - static_cast<double>(refilled_at_ns_);
    budget_ = std::min(kBudget, budget_ + elapsed / static_cast<double>(settings_.cooldown_ns));
  }
  // A step from before the last refill (or one that claimed a future end before it) moves the reference back:
  // the budget never grows past kBudget whatever the steps claim.
  refilled_at_ns_ = end_ns;
}

double SlowStepDetector::RecentMax::around(int64_t end_ns, int64_t cooldown_ns) const {
  if (cooldown_ns <= 0) return 0;
  const int64_t index = end_ns / std::max<int64_t>(cooldown_ns / kSlices, 1);
  double max_ratio = 0;
  for (const Slice& s : slices_) {
    if (s.index >= 0 && s.index > index - kSlices && s.index < index + kSlices) {
      max_ratio = std::max(max_ratio, s.max_ratio);
    }
  }
  return max_ratio;
}

void SlowStepDetector::RecentMax::record(int64_t end_ns, double ratio, int64_t cooldown_ns) {
  if (cooldown_ns <= 0) return;
  const int64_t index = end_ns / std::max<int64_t>(cooldown_ns / kSlices, 1);
  Slice& s = slices_[((index % kSlices) + kSlices) % kSlices];
  // A slice from far ahead (a step claiming a future end) is taken back by the present.
  if (s.index < index || s.index >= index + kSlices) s = Slice{index, 0};
  // A step older than the slice now in its place (out of order, by more than a cool-down) sets no bar.
  if (s.index == index) s.max_ratio = std::max(s.max_ratio, ratio);
}

int64_t SlowStepDetector::mad(const Window& w, int64_t median) {
  scratch_.clear();
  for (int64_t t : w.sorted) scratch_.push_back(t > median ? t - median : median - t);
  auto middle = scratch_.begin() + static_cast<std::ptrdiff_t>(scratch_.size() / 2);
  std::nth_element(scratch_.begin(), middle, scratch_.end());
  return *middle;
}

SlowStepDetector::Window& SlowStepDetector::window_of(int32_t pid, int64_t end_ns) {
  auto it = windows_.find(pid);
  if (it == windows_.end()) {
    if (windows_.size() >= settings_.max_processes) {
      const auto silent_longest = std::min_element(windows_.begin(), windows_.end(), [](const auto& a, const auto& b) {
        return a.second.last_end_ns < b.second.last_end_ns;
      });
      windows_.erase(silent_longest);
      ++forgotten_;
    }
    it = windows_.emplace(pid, Window{}).first;
    it->second.ring.reserve(settings_.history);
    it->second.sorted.reserve(settings_.history);
    it->second.first_end_ns = end_ns;
    if (scratch_.capacity() < settings_.history) scratch_.reserve(settings_.history);
  }
  it->second.last_end_ns = end_ns;
  return it->second;
}

void SlowStepDetector::add(Window& w, int64_t step_ns) const {
  if (w.ring.size() < settings_.history) {
    w.ring.push_back(step_ns);
  } else {
    int64_t& oldest = w.ring[w.next];
    w.sorted.erase(std::lower_bound(w.sorted.begin(), w.sorted.end(), oldest));
    oldest = step_ns;
    w.next = (w.next + 1) % settings_.history;
  }
  w.sorted.insert(std::upper_bound(w.sorted.begin(), w.sorted.end(), step_ns), step_ns);
}

size_t SlowStepDetector::processes() const {
  std::lock_guard lock(mu_);
  return windows_.size();
}

uint64_t SlowStepDetector::processes_forgotten() const {
  std::lock_guard lock(mu_);
  return forgotten_;
}

}  // namespace podscope::agent
