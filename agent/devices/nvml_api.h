// The few NVML entry points podscope uses, declared here and resolved with dlopen at run time so the
// agent builds and runs on hosts without NVIDIA's driver. Types and constants follow nvml.h (ABI-stable
// since the _v2/_v3 entry points named below).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace podscope::agent::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorNotSupported = 3;

using Device = struct nvmlDevice_st*;

struct Utilization {  // nvmlUtilization_t, percent over the driver's last sample period
  unsigned int gpu;
  unsigned int memory;
};

struct Memory {  // nvmlMemory_t, bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct PciInfo {  // nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v3
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};

union Value {  // nvmlValue_t
  double d;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
  int si;
  unsigned short us;
};

struct FieldValue {  // nvmlFieldValue_t
  unsigned int field_id;
  unsigned int scope_id;
  long long timestamp;
  long long latency_usec;
  int value_type;
  Return nvml_return;
  Value value;
};

inline constexpr unsigned int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
inline constexpr unsigned int kClockSm = 1;         // NVML_CLOCK_SM
inline constexpr unsigned int kClockMem = 2;        // NVML_CLOCK_MEM
inline constexpr unsigned int kPcieTx = 0;          // NVML_PCIE_UTIL_TX_BYTES (KB/s)
inline constexpr unsigned int kPcieRx = 1;          // NVML_PCIE_UTIL_RX_BYTES (KB/s)
// NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX: KiB moved since boot; scope UINT_MAX sums over all links.
inline constexpr unsigned int kFieldNvlinkDataTx = 138;
inline constexpr unsigned int kFieldNvlinkDataRx = 139;
inline constexpr unsigned int kScopeAllLinks = 0xffffffffu;

// Function table of one loaded libnvidia-ml. Every pointer is non-null once load() succeeded.
struct Api {
  Return (*init)();
  Return (*shutdown)();
  const char* (*error_string)(Return);
  Return (*device_count)(unsigned int*);
  Return (*device_by_index)(unsigned int, Device*);
  Return (*device_name)(Device, char*, unsigned int);
  Return (*device_uuid)(Device, char*, unsigned int);
  Return (*device_pci_info)(Device, PciInfo*);
  Return (*utilization)(Device, Utilization*);
  Return (*memory_info)(Device, Memory*);
  Return (*power_usage)(Device, unsigned int*);                    // mW
  Return (*temperature)(Device, unsigned int, unsigned int*);      // °C
  Return (*clock_info)(Device, unsigned int, unsigned int*);       // MHz
  Return (*pcie_throughput)(Device, unsigned int, unsigned int*);  // KB/s; blocks ~20 ms
  Return (*field_values)(Device, int, FieldValue*);

  std::string error(Return r) const { return error_string ? error_string(r) : "NVML error " + std::to_string(r); }
};

// A dlopen()ed libnvidia-ml; unloads on destruction.
class Library {
 public:
  // Opens `path` (a soname searched the usual way, or a file path) and resolves every symbol of Api.
  static absl::StatusOr<std::unique_ptr<Library>> load(const std::string& path = "libnvidia-ml.so.1");
  ~Library();
  const Api& api() const { return api_; }

 private:
  explicit Library(void* handle) : handle_(handle) {}
  void* handle_;
  Api api_{};
};

}  // namespace podscope::agent::nvml
