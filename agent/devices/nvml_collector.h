// Per-GPU counters from NVML (utilization, memory, power, temperature, clocks, PCIe and NVLink traffic),
// as Prometheus series labelled gpu/uuid/pci_bus_id/model and as counter tracks on `/device:GPU:<n>`.
// NVML's PCIe throughput query blocks for about 20 ms per GPU, so this collector runs on a
// CollectorThread. Without the library or GPUs it is unavailable (with the reason) and retries rarely.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/collectors/collector.h"
#include "agent/devices/nvml_api.h"
#include "agent/devices/device_utilization.h"

namespace podscope::agent {

class NvmlCollector : public Collector, public DeviceUtilizationSource {
 public:
  // `library` is what dlopen() is given: the driver's soname by default, a file path in tests.
  explicit NvmlCollector(std::string library = "libnvidia-ml.so.1");
  ~NvmlCollector() override;

  std::string_view name() const override { return "nvml"; }
  CollectorState status() const override { return state_.get(); }
  CollectorState::State state() const override { return state_.state(); }
  void sample(int64_t now_ns, SampleSink& sink) override;
  std::optional<DeviceUtilization> device_utilization() const override;

  // How long to wait before trying to load/initialize NVML again after it failed.
  static constexpr int64_t kRetryPeriodNs = 60'000'000'000;

  enum Series : size_t {
    kGpuUtilization,
    kMemoryUtilization,
    kMemoryUsed,
    kMemoryTotal,
    kPower,
    kTemperature,
    kSmClock,
    kMemoryClock,
    kPcieTx,
    kPcieRx,
    kNvlinkTx,
    kNvlinkRx,
    kSeriesCount
  };

 private:
  struct Gpu {
    nvml::Device handle;
    int index;
    std::string model, uuid, pci_bus_id;
    std::array<std::optional<SeriesId>, kSeriesCount> series;
  };

  void try_start(int64_t now_ns);
  void stop_nvml();
  void record(Gpu& gpu, Series series, int64_t now_ns, double value, SampleSink& sink);

  const std::string library_path_;
  std::unique_ptr<nvml::Library> library_;
  bool initialized_ = false;
  int64_t next_start_attempt_ns_ = 0;
  std::vector<Gpu> gpus_;
  CollectorStateCell state_;
  mutable std::mutex mu_;
  std::vector<double> gpu_utilization_percent_;  // latest, by GPU index; empty while unavailable
  std::string model_;                            // GPU 0's model name, for Monitor
};

}  // namespace podscope::agent
