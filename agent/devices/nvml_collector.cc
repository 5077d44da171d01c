#include "agent/devices/nvml_collector.h"

#include "daemon/log.h"
#include "proto/xspace/names.h"

namespace podscope::agent {
namespace {

struct SeriesDef {
  const char* metric;  // base units
  const char* help;
  SeriesSpec::Kind kind;
};

constexpr std::array<SeriesDef, NvmlCollector::kSeriesCount> kSeries{{
    {"podscope_gpu_utilization_ratio", "Share of time a kernel was running on the GPU (NVML)",
     SeriesSpec::Kind::kGauge},
    {"podscope_gpu_memory_bandwidth_utilization_ratio", "Share of time device memory was read or written (NVML)",
     SeriesSpec::Kind::kGauge},
    {"podscope_gpu_memory_used_bytes", "Device memory in use (NVML)", SeriesSpec::Kind::kGauge},
    {"podscope_gpu_memory_total_bytes", "Device memory capacity (NVML)", SeriesSpec::Kind::kGauge},
    {"podscope_gpu_power_watts", "Power draw (NVML)", SeriesSpec::Kind::kGauge},
    {"podscope_gpu_temperature_celsius", "GPU die temperature (NVML)", SeriesSpec::Kind::kGauge},
    {"podscope_gpu_sm_clock_hertz", "SM clock (NVML)", SeriesSpec::Kind::kGauge},
    {"podscope_gpu_memory_clock_hertz", "Memory clock (NVML)", SeriesSpec::Kind::kGauge},
    {"podscope_gpu_pcie_tx_bytes_per_second", "PCIe transmit throughput (NVML, 20 ms sample)",
     SeriesSpec::Kind::kGauge},
    {"podscope_gpu_pcie_rx_bytes_per_second", "PCIe receive throughput (NVML, 20 ms sample)", SeriesSpec::Kind::kGauge},
    {"podscope_gpu_nvlink_tx_bytes_total", "NVLink data transmitted, all links (NVML)", SeriesSpec::Kind::kCounter},
    {"podscope_gpu_nvlink_rx_bytes_total", "NVLink data received, all links (NVML)", SeriesSpec::Kind::kCounter},
}};

std::string read_string(nvml::Return (*fn)(nvml::Device, char*, unsigned int), nvml::Device device) {
  char buf[96] = {};
  return fn(device, buf, sizeof(buf)) == nvml::kSuccess ? std::string(buf) : std::string();
}

}  // namespace

NvmlCollector::NvmlCollector(std::string library) : library_path_(std::move(library)) {
  state_.set(CollectorState::State::kUnavailable, "NVML not loaded yet");
}

NvmlCollector::~NvmlCollector() { stop_nvml(); }

void NvmlCollector::stop_nvml() {
  if (initialized_) library_->api().shutdown();
  initialized_ = false;
  gpus_.clear();
  library_.reset();
  std::lock_guard lock(mu_);
  gpu_utilization_percent_.clear();
}

void NvmlCollector::try_start(int64_t now_ns) {
  next_start_attempt_ns_ = now_ns + kRetryPeriodNs;
  auto fail = [&](std::string reason) {
    stop_nvml();
    if (state_.get().reason != reason) {
      PODSCOPE_LOG(kInfo) << "nvml: " << describe({CollectorState::State::kUnavailable, reason});
    }
    state_.set(CollectorState::State::kUnavailable, std::move(reason));
  };
  auto library = nvml::Library::load(library_path_);
  if (!library.ok()) return fail(std::string(library.status().message()));
  library_ = std::move(*library);
  const nvml::Api& api = library_->api();
  if (nvml::Return r = api.init(); r != nvml::kSuccess) return fail("nvmlInit failed: " + api.error(r));
  initialized_ = true;
  unsigned int count = 0;
  if (nvml::Return r = api.device_count(&count); r != nvml::kSuccess) {
    return fail("nvmlDeviceGetCount failed: " + api.error(r));
  }
  if (count == 0) return fail("NVML reports no GPUs");
  for (unsigned int i = 0; i < count; ++i) {
    nvml::Device handle = nullptr;
    if (nvml::Return r = api.device_by_index(i, &handle); r != nvml::kSuccess) {
      return fail("nvmlDeviceGetHandleByIndex(" + std::to_string(i) + ") failed: " + api.error(r));
    }
    Gpu gpu{handle, static_cast<int>(i), read_string(api.device_name, handle), read_string(api.device_uuid, handle), "",
            {}};
    nvml::PciInfo pci{};
    if (api.device_pci_info(handle, &pci) == nvml::kSuccess) gpu.pci_bus_id = pci.bus_id;
    gpus_.push_back(std::move(gpu));
  }
  PODSCOPE_LOG(kInfo) << "nvml: " << count << " GPU(s), first " << gpus_.front().model;
  state_.set(CollectorState::State::kOk);
  std::lock_guard lock(mu_);
  model_ = gpus_.front().model;
}

void NvmlCollector::record(Gpu& gpu, Series series, int64_t now_ns, double value, SampleSink& sink) {
  auto& id = gpu.series[series];
  if (!id) {
    SeriesSpec spec;
    spec.metric = kSeries[series].metric;
    spec.help = kSeries[series].help;
    spec.kind = kSeries[series].kind;
    spec.labels = {
        {"gpu", std::to_string(gpu.index)}, {"uuid", gpu.uuid}, {"pci_bus_id", gpu.pci_bus_id}, {"model", gpu.model}};
    spec.plane = std::string(xspace::kGpuPlanePrefix) + std::to_string(gpu.index);
    spec.track = spec.metric;
    id = sink.declare(spec);
  }
  sink.record(*id, now_ns, value);
}

void NvmlCollector::sample(int64_t now_ns, SampleSink& sink) {
  if (!initialized_ && now_ns >= next_start_attempt_ns_) try_start(now_ns);
  if (!initialized_) return;
  const nvml::Api& api = library_->api();
  std::vector<double> utilization(gpus_.size(), 0.0);
  std::string failure;  // the first unexpected error of this pass; NOT_SUPPORTED is expected and skipped
  auto ok = [&](nvml::Return r, const char* call, const Gpu& gpu) {
    if (r == nvml::kSuccess) return true;
    if (r != nvml::kErrorNotSupported && failure.empty()) {
      failure = std::string(call) + " on GPU " + std::to_string(gpu.index) + ": " + api.error(r);
    }
    return false;
  };
  for (Gpu& gpu : gpus_) {
    nvml::Utilization u{};
    if (ok(api.utilization(gpu.handle, &u), "nvmlDeviceGetUtilizationRates", gpu)) {
      record(gpu, kGpuUtilization, now_ns, u.gpu / 100.0, sink);
      record(gpu, kMemoryUtilization, now_ns, u.memory / 100.0, sink);
      utilization[gpu.index] = u.gpu;
    }
    nvml::Memory m{};
    if (ok(api.memory_info(gpu.handle, &m), "nvmlDeviceGetMemoryInfo", gpu)) {
      record(gpu, kMemoryUsed, now_ns, static_cast<double>(m.used), sink);
      record(gpu, kMemoryTotal, now_ns, static_cast<double>(m.total), sink);
    }
    unsigned int v = 0;
    if (ok(api.power_usage(gpu.handle, &v), "nvmlDeviceGetPowerUsage", gpu))
      record(gpu, kPower, now_ns, v / 1000.0, sink);
    if (ok(api.temperature(gpu.handle, nvml::kTemperatureGpu, &v), "nvmlDeviceGetTemperature", gpu)) {
      record(gpu, kTemperature, now_ns, v, sink);
    }
    if (ok(api.clock_info(gpu.handle, nvml::kClockSm, &v), "nvmlDeviceGetClockInfo", gpu)) {
      record(gpu, kSmClock, now_ns, v * 1e6, sink);
    }
    if (ok(api.clock_info(gpu.handle, nvml::kClockMem, &v), "nvmlDeviceGetClockInfo", gpu)) {
      record(gpu, kMemoryClock, now_ns, v * 1e6, sink);
    }
    if (ok(api.pcie_throughput(gpu.handle, nvml::kPcieTx, &v), "nvmlDeviceGetPcieThroughput", gpu)) {
      record(gpu, kPcieTx, now_ns, v * 1024.0, sink);
    }
    if (ok(api.pcie_throughput(gpu.handle, nvml::kPcieRx, &v), "nvmlDeviceGetPcieThroughput", gpu)) {
      record(gpu, kPcieRx, now_ns, v * 1024.0, sink);
    }
    nvml::FieldValue nvlink[2]{};
    nvlink[0].field_id = nvml::kFieldNvlinkDataTx;
    nvlink[1].field_id = nvml::kFieldNvlinkDataRx;
    nvlink[0].scope_id = nvlink[1].scope_id = nvml::kScopeAllLinks;
    // GPUs without NVLink answer with per-field NOT_SUPPORTED: no series for them.
    if (api.field_values(gpu.handle, 2, nvlink) == nvml::kSuccess) {
      if (nvlink[0].nvml_return == nvml::kSuccess) record(gpu, kNvlinkTx, now_ns, nvlink[0].value.ull * 1024.0, sink);
      if (nvlink[1].nvml_return == nvml::kSuccess) record(gpu, kNvlinkRx, now_ns, nvlink[1].value.ull * 1024.0, sink);
    }
  }
  if (failure.empty()) {
    state_.set(CollectorState::State::kOk);
  } else {
    state_.set(CollectorState::State::kDegraded, std::move(failure));
  }
  std::lock_guard lock(mu_);
  gpu_utilization_percent_ = std::move(utilization);
}

std::optional<DeviceUtilization> NvmlCollector::device_utilization() const {
  std::lock_guard lock(mu_);
  if (gpu_utilization_percent_.empty()) return std::nullopt;
  DeviceUtilization u;
  u.device_count = static_cast<int>(gpu_utilization_percent_.size());
  u.core_count = u.device_count;
  double sum = 0;
  for (double p : gpu_utilization_percent_) sum += p;
  u.utilization_percent = sum / u.device_count;
  u.utilization_kind = "GPU utilization (NVML: share of time a kernel was running)";
  u.device_type = model_;
  u.short_name = "GPU";
  u.count_label = "GPUs";
  return u;
}

}  // namespace podscope::agent
