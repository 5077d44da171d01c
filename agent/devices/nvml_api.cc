#include "agent/devices/nvml_api.h"

#include <dlfcn.h>

namespace podscope::agent::nvml {
namespace {

template <typename Fn>
absl::Status resolve(void* handle, const char* symbol, const std::string& path, Fn& out) {
  void* p = dlsym(handle, symbol);
  if (p == nullptr) return absl::NotFoundError(path + " lacks " + symbol + " (driver too old?)");
  out = reinterpret_cast<Fn>(p);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Library>> Library::load(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError("cannot load " + path + ": " + (why ? why : "unknown dlopen error"));
  }
  std::unique_ptr<Library> lib(new Library(handle));
  Api& a = lib->api_;
  for (absl::Status s : {
           resolve(handle, "nvmlInit_v2", path, a.init),
           resolve(handle, "nvmlShutdown", path, a.shutdown),
           resolve(handle, "nvmlErrorString", path, a.error_string),
           resolve(handle, "nvmlDeviceGetCount_v2", path, a.device_count),
           resolve(handle, "nvmlDeviceGetHandleByIndex_v2", path, a.device_by_index),
           resolve(handle, "nvmlDeviceGetName", path, a.device_name),
           resolve(handle, "nvmlDeviceGetUUID", path, a.device_uuid),
           resolve(handle, "nvmlDeviceGetPciInfo_v3", path, a.device_pci_info),
           resolve(handle, "nvmlDeviceGetUtilizationRates", path, a.utilization),
           resolve(handle, "nvmlDeviceGetMemoryInfo", path, a.memory_info),
           resolve(handle, "nvmlDeviceGetPowerUsage", path, a.power_usage),
           resolve(handle, "nvmlDeviceGetTemperature", path, a.temperature),
           resolve(handle, "nvmlDeviceGetClockInfo", path, a.clock_info),
           resolve(handle, "nvmlDeviceGetPcieThroughput", path, a.pcie_throughput),
           resolve(handle, "nvmlDeviceGetFieldValues", path, a.field_values),
       }) {
    if (!s.ok()) return s;
  }
  return lib;
}

Library::~Library() { dlclose(handle_); }

}  // namespace podscope::agent::nvml
