// TPU runtime counters: duty cycle, HBM usage, idle time, read from libtpu's metric service through a
// TpuMetricSource and written as per-device series (Prometheus + `/device:TPU:<id>` counter tracks).
// Blocks on the metric service, so it runs on a CollectorThread. Also the device Monitor reports while
// the service answers: "TPU <type>", with the TensorCore duty cycle as the utilization figure.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "agent/collectors/collector.h"
#include "agent/devices/device_utilization.h"
#include "agent/devices/tpu_chips.h"
#include "agent/devices/tpu_metric_client.h"

namespace podscope::agent {

class TpuRuntimeCollector : public Collector, public DeviceUtilizationSource {
 public:
  TpuRuntimeCollector(std::unique_ptr<TpuMetricSource> source, TpuHostInventory chips);

  std::string_view name() const override { return "tpu_runtime"; }
  CollectorState status() const override { return state_.get(); }
  CollectorState::State state() const override { return state_.state(); }
  void sample(int64_t now_ns, SampleSink& sink) override;
  std::optional<DeviceUtilization> device_utilization() const override;

 private:
  SeriesId series_for(size_t metric_index, int64_t device_id, SampleSink& sink);

  std::unique_ptr<TpuMetricSource> source_;
  const TpuHostInventory chips_;
  CollectorStateCell state_;
  absl::flat_hash_map<std::pair<size_t, int64_t>, SeriesId> series_;
  mutable std::mutex mu_;
  std::map<int64_t, double> duty_cycle_percent_;  // by device id; empty while the service is unavailable
};

}  // namespace podscope::agent
