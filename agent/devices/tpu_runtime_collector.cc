#include "agent/devices/tpu_runtime_collector.h"

#include <array>
#include <string_view>

#include "daemon/log.h"
#include "proto/xspace/names.h"

namespace podscope::agent {
namespace {

struct TpuMetricDef {
  std::string_view runtime_name;  // as libtpu names it
  std::string_view metric;        // Prometheus family, base units
  std::string_view help;
  double scale;  // runtime value × scale = value in base units
};

constexpr std::string_view kDutyCycleMetric = "tpu.runtime.tensorcore.dutycycle.percent";

constexpr std::array<TpuMetricDef, 5> kMetrics{{
    {kDutyCycleMetric, "podscope_tpu_tensorcore_duty_cycle_ratio",
     "Share of time the TensorCore was executing, from libtpu (duty cycle)", 0.01},
    {"tpu.runtime.hbm.memory.usage.bytes", "podscope_tpu_hbm_used_bytes", "HBM in use, from libtpu", 1},
    {"tpu.runtime.hbm.memory.total.bytes", "podscope_tpu_hbm_total_bytes", "HBM capacity, from libtpu", 1},
    {"tpu.runtime.hbm.utilization.percent", "podscope_tpu_hbm_bandwidth_utilization_ratio",
     "HBM bandwidth utilization, from libtpu", 0.01},
    {"tpu.runtime.tensorcore.idle_duration.seconds", "podscope_tpu_tensorcore_idle_seconds",
     "How long the TensorCore has been idle, from libtpu", 1},
}};

bool is_unreachable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

}  // namespace

TpuRuntimeCollector::TpuRuntimeCollector(std::unique_ptr<TpuMetricSource> source, TpuHostInventory chips)
    : source_(std::move(source)), chips_(std::move(chips)) {
  state_.set(CollectorState::State::kUnavailable,
             "libtpu metric service at " + std::string(source_->address()) + " not queried yet");
}

SeriesId TpuRuntimeCollector::series_for(size_t metric_index, int64_t device_id, SampleSink& sink) {
  const auto key = std::make_pair(metric_index, device_id);
  if (auto it = series_.find(key); it != series_.end()) return it->second;
  const TpuMetricDef& def = kMetrics[metric_index];
  SeriesSpec spec;
  spec.metric = std::string(def.metric);
  spec.help = std::string(def.help);
  spec.labels = {{"tpu", std::to_string(device_id)}};
  if (!chips_.chips.empty()) spec.labels.emplace_back("type", chips_.type());
  spec.plane = std::string(xspace::kTpuPlanePrefix) + std::to_string(device_id);
  spec.track = spec.metric;
  const SeriesId id = sink.declare(spec);
  series_.emplace(key, id);
  return id;
}

void TpuRuntimeCollector::sample(int64_t now_ns, SampleSink& sink) {
  size_t answered = 0;
  absl::Status unreachable;
  absl::Status failure;  // another error (not NOT_FOUND), for the reason when nothing answered
  std::map<int64_t, double> duty_cycle;
  for (size_t i = 0; i < kMetrics.size(); ++i) {
    auto points = source_->get(kMetrics[i].runtime_name);
    if (!points.ok()) {
      // A metric this libtpu does not export is normal (older runtimes lack some): skip it quietly.
      if (absl::IsNotFound(points.status())) {
        ++answered;
        continue;
      }
      if (is_unreachable(points.status())) {
        unreachable = points.status();
        break;  // no runtime: don't wait out a timeout per metric
      }
      failure = points.status();
      continue;
    }
    ++answered;
    for (const auto& point : *points) {
      sink.record(series_for(i, point.device_id, sink), now_ns, point.value * kMetrics[i].scale);
      if (kMetrics[i].runtime_name == kDutyCycleMetric) duty_cycle[point.device_id] = point.value;
    }
  }

  const CollectorState before = state_.get();
  if (answered == 0) {
    const absl::Status& why = unreachable.ok() ? failure : unreachable;
    std::string reason(why.ok() ? "no metric answered" : why.message());
    if (chips_.chips.empty()) reason += " (no TPU on the PCI bus)";
    state_.set(CollectorState::State::kUnavailable, std::move(reason));
  } else if (duty_cycle.empty()) {
    state_.set(CollectorState::State::kDegraded,
               "libtpu at " + std::string(source_->address()) + " reports no TensorCore duty cycle");
  } else {
    state_.set(CollectorState::State::kOk);
  }
  // One line per change of state, none per failed poll: a host without TPUs polls every second.
  const CollectorState after = state_.get();
  if (after.state != before.state) {
    PODSCOPE_LOG(kInfo) << "tpu_runtime: " << describe(after);
  }
  std::lock_guard lock(mu_);
  duty_cycle_percent_ = std::move(duty_cycle);
}

std::optional<DeviceUtilization> TpuRuntimeCollector::device_utilization() const {
  std::lock_guard lock(mu_);
  if (duty_cycle_percent_.empty()) return std::nullopt;
  DeviceUtilization u;
  u.device_type = chips_.chips.empty() ? "TPU" : "TPU " + chips_.type();
  u.short_name = "TPU";
  u.count_label = "TPU cores";
  u.device_count = static_cast<int>(duty_cycle_percent_.size());
  u.core_count = chips_.chips.empty() ? u.device_count : chips_.core_count();
  double sum = 0;
  for (const auto& [id, percent] : duty_cycle_percent_) sum += percent;
  u.utilization_percent = sum / duty_cycle_percent_.size();
  u.utilization_kind = "TensorCore duty cycle";
  return u;
}

}  // namespace podscope::agent
