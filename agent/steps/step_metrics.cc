#include "agent/steps/step_metrics.h"

#include <string>
#include <utility>

#include "daemon/host_metrics.h"

namespace podscope::agent {

StepMetrics::StepMetrics(prometheus::Registry& registry, const std::string& host_name)
    : step_time_(host_family<prometheus::Histogram>(registry, host_name, "podscope_step_time_seconds",
                                                    "Step time reported by annotated training processes, per core")),
      infeed_share_(
          host_family<prometheus::Gauge>(registry, host_name, "podscope_step_infeed_ratio",
                                         "Share of the last step spent waiting for input (infeed), per core")),
      all_reduce_share_(host_family<prometheus::Gauge>(registry, host_name, "podscope_step_all_reduce_ratio",
                                                       "Share of the last step spent in all-reduce, per core")),
      infeed_seconds_(host_family<prometheus::Counter>(registry, host_name, "podscope_step_infeed_seconds_total",
                                                       "Time in infeed inside steps, per core")),
      all_reduce_seconds_(host_family<prometheus::Counter>(
          registry, host_name, "podscope_step_all_reduce_seconds_total", "Time in all-reduce inside steps, per core")),
      dropped_(host_counter(registry, host_name, "podscope_client_dropped_events_total",
                            "Events annotated processes dropped because their buffers were full")),
      budget_dropped_events_(
          host_counter(registry, host_name, "podscope_capture_budget_dropped_events_total",
                       "Events of annotated processes a capture dropped at capture_memory_limit_mb")),
      budget_dropped_steps_(
          host_counter(registry, host_name, "podscope_capture_budget_dropped_steps_total",
                       "Whole steps of annotated processes a capture dropped at capture_memory_limit_mb")) {}

StepMetrics::PerCore& StepMetrics::core(const std::string& training_job, int32_t core_id) {
  auto key = std::make_pair(training_job, core_id);
  auto it = cores_.find(key);
  if (it != cores_.end()) return it->second;
  const std::map<std::string, std::string> labels{{"training_job", training_job}, {"core", std::to_string(core_id)}};
  // Steps range from ~1 ms to minutes.
  static const prometheus::Histogram::BucketBoundaries kBuckets{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2,
                                                                0.5,   1,     2,     5,    10,   30,   60};
  PerCore c{&step_time_.Add(labels, kBuckets), &infeed_share_.Add(labels), &all_reduce_share_.Add(labels),
            &infeed_seconds_.Add(labels), &all_reduce_seconds_.Add(labels)};
  return cores_.emplace(std::move(key), c).first->second;
}

void StepMetrics::record(const std::string& training_job, const StepRecord& step) {
  // Times come from client processes: a step whose span overflows, is empty, or whose parts do not fit in it is
  // not a step (it would give shares above 1 or negative counter increments).
  int64_t duration = 0;
  if (__builtin_sub_overflow(step.end_ns, step.begin_ns, &duration) || duration <= 0) return;
  if (step.infeed_ns < 0 || step.infeed_ns > duration || step.all_reduce_ns < 0 || step.all_reduce_ns > duration)
    return;
  std::lock_guard lock(mu_);
  PerCore& c = core(training_job, step.core_id);
  c.step_time->Observe(static_cast<double>(duration) / 1e9);
  c.infeed_share->Set(static_cast<double>(step.infeed_ns) / static_cast<double>(duration));
  c.all_reduce_share->Set(static_cast<double>(step.all_reduce_ns) / static_cast<double>(duration));
  c.infeed_seconds->Increment(static_cast<double>(step.infeed_ns) / 1e9);
  c.all_reduce_seconds->Increment(static_cast<double>(step.all_reduce_ns) / 1e9);
}

}  // namespace podscope::agent
