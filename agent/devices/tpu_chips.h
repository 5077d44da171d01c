// TPU chip discovery from the PCI bus: Google's vendor id 0x1ae0 under /sys/bus/pci/devices. Gives the TPU
// generation and its core count (v2/v3 chips have two TensorCores, later generations one per chip) even
// while no runtime is up; the runtime metric service gives the live figures.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace podscope::agent {

struct TpuChip {
  std::string pci_address;  // e.g. "0000:00:04.0"
  std::string type;         // "v2", "v3", "v4", "v5e", "v5p", "v6e", or "unknown (device 0x....)"
  int cores = 1;            // TensorCores on this chip
};

struct TpuHostInventory {
  std::vector<TpuChip> chips;  // sorted by PCI address
  std::string type() const;    // the chips' type ("" when none; "mixed" if they differ)
  int core_count() const;
};

// Reads `pci_devices_dir` (a directory of PCI device entries with `vendor`, `device`, `subsystem_device`
// files). A missing directory yields an empty inventory: hosts without TPUs are the common case.
TpuHostInventory discover_tpu_chips(const std::filesystem::path& pci_devices_dir = "/sys/bus/pci/devices");

}  // namespace podscope::agent
