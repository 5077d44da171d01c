#include "agent/steps/slow_step_detector.h"

#include <algorithm>

namespace podscope::agent {

std::optional<SlowStep> SlowStepDetector::observe(int32_t pid, const StepRecord& step) {
  const int64_t step_ns = step.end_ns - step.begin_ns;
  if (step_ns <= 0) return std::nullopt;
  std::lock_guard lock(mu_);
  Window& w = window_of(pid, step.end_ns);
  std::optional<SlowStep> slow;
  if (static_cast<int64_t>(w.sorted.size()) >= settings_.min_steps) {
    const int64_t median = w.sorted[w.sorted.size() / 2];
    const bool cooling = last_trigger_ns_ && step.end_ns - *last_trigger_ns_ < settings_.cooldown_ns;
    if (!cooling && static_cast<double>(step_ns) > settings_.factor * static_cast<double>(median)) {
      slow = SlowStep{pid, step, step_ns, median};
      last_trigger_ns_ = step.end_ns;
    }
  }
  add(w, step_ns);
  return slow;
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
