// Keeps the coordinator's clock estimate for every worker current: a ping burst per worker every interval,
// recorded in the registry (offset, RTT, running drift) and the metrics. Static workers are marked up or
// down by whether these pings answer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "coordinator/coordinator_metrics.h"
#include "pod_capture/cancellation.h"
#include "coordinator/worker_registry.h"
#include "daemon/clock.h"

namespace podscope::coordinator {

class ClockTracker {
 public:
  ClockTracker(WorkerRegistry& registry, CoordinatorMetrics& metrics, const Clock& clock, int64_t interval_ms,
               int pings);
  ~ClockTracker();  // stops the thread
  ClockTracker(const ClockTracker&) = delete;
  ClockTracker& operator=(const ClockTracker&) = delete;

  void measure_all();  // one round, on the caller's thread
  // Starts the next round now (e.g. a worker just registered and has no estimate yet).
  void wake();

 private:
  void run();
  WorkerRegistry& registry_;
  CoordinatorMetrics& metrics_;
  pod_capture::Cancellation stopping_;  // a round under way ends at once when the tracker goes
  const Clock& clock_;
  const int64_t interval_ms_;
  const int pings_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;
  std::thread thread_;
};

}  // namespace podscope::coordinator
