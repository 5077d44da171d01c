// What Monitor (levels 1 and 2) reports as "the device" of this host: the accelerator a device collector
// sees and its current utilization. Implemented by the TPU runtime collector (duty cycle) and the NVML
// collector (GPU utilization). The agent hands them to Monitor in the order of its component table
// (agent/components.cc); Monitor reports the first that has a figure, else the host CPU.
#pragma once

#include <optional>
#include <string>

namespace podscope::agent {

struct DeviceUtilization {
  std::string device_type;         // e.g. "TPU v4", "NVIDIA H100 80GB HBM3"
  std::string short_name;          // "TPU", "GPU": names the device in Monitor's lines ("TPU idle time")
  std::string count_label;         // what core_count counts: "TPU cores", "GPUs"
  int device_count = 0;            // devices reporting a figure (TPU chips or cores as libtpu numbers them; GPUs)
  int core_count = 0;              // TensorCores from PCI discovery (v2/v3: two per chip), else device_count
  double utilization_percent = 0;  // mean over devices
  std::string utilization_kind;    // what the figure is: "TensorCore duty cycle", "GPU utilization (NVML)";
                                   // empty for the host CPU
};

class DeviceUtilizationSource {
 public:
  virtual ~DeviceUtilizationSource() = default;
  // The latest figure, or nullopt while the device's source is unavailable. Thread-safe and non-blocking.
  virtual std::optional<DeviceUtilization> device_utilization() const = 0;
};

}  // namespace podscope::agent
