#include "agent/devices/tpu_chips.h"

#include <algorithm>
#include <fstream>
#include <system_error>

namespace podscope::agent {
namespace {

constexpr std::string_view kGoogleVendorId = "0x1ae0";

std::string read_trimmed(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string value;
  in >> value;
  return value;
}

// Device ids as Google's TPU VMs expose them; v2 and v3 share one device id and differ by subsystem.
TpuChip identify(std::string pci_address, const std::string& device, const std::string& subsystem) {
  TpuChip chip{std::move(pci_address), "", 1};
  if (device == "0x0027") {
    chip.cores = 2;
    chip.type = subsystem == "0x004e" ? "v2" : subsystem == "0x004f" ? "v3" : "v2/v3 (subsystem " + subsystem + ")";
  } else if (device == "0x005e") {
    chip.type = "v4";
  } else if (device == "0x0063") {
    chip.type = "v5e";
  } else if (device == "0x0062") {
    chip.type = "v5p";
  } else if (device == "0x006f") {
    chip.type = "v6e";
  } else {
    chip.type = "unknown (device " + device + ")";
  }
  return chip;
}

}  // namespace

std::string TpuHostInventory::type() const {
  if (chips.empty()) return "";
  for (const auto& chip : chips) {
    if (chip.type != chips.front().type) return "mixed";
  }
  return chips.front().type;
}

int TpuHostInventory::core_count() const {
  int cores = 0;
  for (const auto& chip : chips) cores += chip.cores;
  return cores;
}

TpuHostInventory discover_tpu_chips(const std::filesystem::path& pci_devices_dir) {
  TpuHostInventory inventory;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(pci_devices_dir, ec)) {
    const auto& dir = entry.path();
    if (read_trimmed(dir / "vendor") != kGoogleVendorId) continue;
    inventory.chips.push_back(
        identify(dir.filename().string(), read_trimmed(dir / "device"), read_trimmed(dir / "subsystem_device")));
  }
  std::sort(inventory.chips.begin(), inventory.chips.end(),
            [](const TpuChip& a, const TpuChip& b) { return a.pci_address < b.pci_address; });
  return inventory;
}

}  // namespace podscope::agent
