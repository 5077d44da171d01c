// StepTracker: step boundaries reported by local annotated processes (always, not only during captures),
// kept per core for Monitor level 2 and the Prometheus step metrics. Written by the local-socket server,
// read by Monitor; a short lock, never on a training process's hot path (the client batches steps).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

namespace podscope::agent {

struct StepRecord {
  int32_t core_id = 0;
  int64_t step_num = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t infeed_ns = 0;      // time in infeed (input wait) inside the step
  int64_t all_reduce_ns = 0;  // time in all-reduce inside the step
};

struct StepSummary {
  int64_t steps = 0;
  int32_t cores = 0;
  double step_time_ms_avg = 0, step_time_ms_min = 0, step_time_ms_max = 0;
  double infeed_percent_avg = 0, infeed_percent_min = 0, infeed_percent_max = 0;
};

class StepTracker {
 public:
  explicit StepTracker(size_t capacity = 16384) : capacity_(capacity) {}

  void record(const StepRecord& step);
  // Steps that ended in [since_ns, until_ns]; nullopt when none.
  std::optional<StepSummary> summarize(int64_t since_ns, int64_t until_ns) const;

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::deque<StepRecord> steps_;
};

}  // namespace podscope::agent
