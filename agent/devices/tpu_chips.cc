#include "agent/devices/tpu_chips.h"

#include <algorithm>
#include <system_error>

#include "agent/collectors/proc_text.h"

namespace podscope::agent {
namespace {

constexpr std::string_view kGoogleVendorId = "0x1ae0";

// The first word of a sysfs attribute ("0x1ae0\n" → "0x1ae0"); empty when it cannot be read.
std::string first_word(const std::filesystem::path& path) {
  ProcFile file(path.string());
  std::string_view text, line, word;
  if (!file.read(text).ok() || !next_line(text, line) || !next_field(line, word)) return "";
  return std::string(word);
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
    if (first_word(dir / "vendor") != kGoogleVendorId) continue;
    inventory.chips.push_back(
        identify(dir.filename().string(), first_word(dir / "device"), first_word(dir / "subsystem_device")));
  }
  std::sort(inventory.chips.begin(), inventory.chips.end(),
            [](const TpuChip& a, const TpuChip& b) { return a.pci_address < b.pci_address; });
  return inventory;
}

}  // namespace podscope::agent
