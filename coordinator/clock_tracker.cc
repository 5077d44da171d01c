#include "coordinator/clock_tracker.h"

namespace podscope::coordinator {

ClockTracker::ClockTracker(WorkerRegistry& registry, CoordinatorMetrics& metrics, const Clock& clock,
                           int64_t interval_ms, int pings)
    : registry_(registry), metrics_(metrics), clock_(clock), interval_ms_(interval_ms), pings_(pings) {
  thread_ = std::thread([this] { run(); });
}

ClockTracker::~ClockTracker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  stopping_.cancel();
  cv_.notify_all();
  thread_.join();
}

void ClockTracker::measure_all() {
  std::vector<std::string> names;
  std::vector<std::shared_ptr<pod_capture::AgentConnection>> held;
  std::vector<pod_capture::AgentConnection*> agents;
  for (const auto& worker : registry_.list(clock_.now_ns())) {
    if (auto connection = registry_.connection(worker.host_name())) {
      names.push_back(worker.host_name());
      agents.push_back(connection.get());
      held.push_back(std::move(connection));
    }
  }
  // Paced as a capture's second burst: one worker at a time where they share this host's CPUs, as many as the
  // round trips leave room for across a network, and over within half the interval however many workers there are.
  const int64_t finish_by_ns = clock_.now_ns() + interval_ms_ * 1'000'000 / 2;
  const auto measurements = pod_capture::measure_clocks(agents, clock_, pings_, 1000,
                                                        {.max_in_flight = pod_capture::kSizedBurstMaxInFlight,
                                                         .sized_from_rtts = true,
                                                         .finish_by_ns = finish_by_ns,
                                                         .cancellation = &stopping_})
                                .clocks;
  if (stopping_.cancelled()) return;  // a cut-off round measured nothing worth recording
  for (size_t i = 0; i < names.size(); ++i) registry_.record_clock(names[i], measurements[i], clock_.now_ns());
  metrics_.update_workers(registry_.list(clock_.now_ns()));
}

void ClockTracker::wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void ClockTracker::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    woken_ = false;
    lock.unlock();
    measure_all();
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [this] { return stop_ || woken_; });
  }
}

}  // namespace podscope::coordinator
