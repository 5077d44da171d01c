#include "cupti/convert/activity_converter.h"

#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/xspace/names.h"

namespace podscope::cupti {
namespace {

// Stat names TF's GPU tracer writes (xplane_schema), so TF-aware readers find them.
constexpr std::string_view kMemcpyDetailsStat = "memcpy_details";
constexpr std::string_view kMemsetDetailsStat = "memset_details";

constexpr std::array<std::string_view, 6> kKindOrder = {"Compute",   "MemcpyH2D", "MemcpyD2H",
                                                        "MemcpyD2D", "MemcpyP2P", "Memset"};

std::string demangle(const char* name) {
  if (name == nullptr) return "unknown kernel";
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) return name;
  std::string result(demangled);
  std::free(demangled);
  return result;
}

std::string_view memcpy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "MemcpyH2D";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "MemcpyD2H";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "MemcpyD2D";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "MemcpyP2P";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "MemcpyH2A";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "MemcpyA2H";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "MemcpyH2H";
    default: return "Memcpy";
  }
}

std::string_view memory_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return "device_static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "managed_static";
    default: return "unknown";
  }
}

std::string_view sync_name(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "cudaStreamWaitEvent";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "cudaDeviceSynchronize";
    default: return "Synchronization";
  }
}

bool is_async(uint8_t flags) { return (flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) != 0; }

// A copy's memcpy_details as TF's GPU tracer writes them, `dest` being the device it copied to.
template <typename Copy>
std::string memcpy_details(const Copy& m, uint32_t dest) {
  return "kind_src:" + std::string(memory_kind(m.srcKind)) + " kind_dst:" + std::string(memory_kind(m.dstKind)) +
         " size:" + std::to_string(m.bytes) + " dest:" + std::to_string(dest) +
         " async:" + (is_async(m.flags) ? "1" : "0");
}

// What every copy and memset carries after its details: its bytes, its API call's correlation id, its context and
// its stream.
template <typename Transfer>
void add_transfer_stats(xspace::XStatsBuilder& stats, const Transfer& m) {
  stats.add(xspace::kBytesStat, static_cast<int64_t>(m.bytes));
  stats.add(xspace::kCorrelationIdStat, int64_t{m.correlationId});
  stats.add(xspace::kContextIdStat, int64_t{m.contextId});
  stats.add(xspace::kStreamIdStat, int64_t{m.streamId});
}

}  // namespace

std::string stream_line_name(uint32_t stream, const std::set<std::string_view>& kinds) {
  std::string joined;
  for (std::string_view kind : kKindOrder) {
    if (!kinds.count(kind)) continue;
    if (!joined.empty()) joined += ',';
    joined += kind;
  }
  for (std::string_view kind : kinds) {  // kinds outside TF's list (MemcpyH2A, ...) follow in name order
    bool listed = false;
    for (std::string_view k : kKindOrder) listed |= k == kind;
    if (listed) continue;
    if (!joined.empty()) joined += ',';
    joined += kind;
  }
  return "Stream #" + std::to_string(stream) + "(" + joined + ")";
}

std::string nccl_collective(std::string_view kernel_name) {
  for (std::string_view prefix : {"ncclDevKernel_", "ncclKernel_"}) {
    if (kernel_name.substr(0, prefix.size()) != prefix) continue;
    std::string_view rest = kernel_name.substr(prefix.size());
    return std::string(rest.substr(0, rest.find_first_of("_(")));
  }
  return "";
}

std::optional<double> theoretical_occupancy_pct(const MultiprocessorLimits& limits, uint32_t threads_per_block,
                                                uint32_t registers_per_thread, uint32_t shared_memory_per_block) {
  if (limits.warps == 0 || limits.threads_per_warp == 0 || threads_per_block == 0) return std::nullopt;
  const uint64_t warps_per_block = (threads_per_block + limits.threads_per_warp - 1) / limits.threads_per_warp;
  uint64_t blocks = std::min<uint64_t>(limits.warps / warps_per_block, limits.blocks ? limits.blocks : UINT32_MAX);
  if (registers_per_thread > 0) {
    blocks = std::min<uint64_t>(
        blocks, limits.registers / (uint64_t{registers_per_thread} * limits.threads_per_warp * warps_per_block));
  }
  if (shared_memory_per_block > 0) {
    blocks = std::min<uint64_t>(blocks, limits.shared_memory_bytes / shared_memory_per_block);
  }
  return std::min(100.0, 100.0 * static_cast<double>(blocks * warps_per_block) / limits.warps);
}

ActivityConverter::ActivityConverter(int64_t host_minus_cupti_ns, ApiNameFn api_name)
    : offset_ns_(host_minus_cupti_ns), api_name_(std::move(api_name)) {}

xspace::XPlaneBuilder& ActivityConverter::gpu_plane(uint32_t device) {
  auto& slot = gpu_planes_[device];
  if (!slot) {
    slot = std::make_unique<xspace::XPlaneBuilder>(
        xspace::find_or_add_plane(space_, std::string(xspace::kGpuPlanePrefix) + std::to_string(device), device));
  }
  return *slot;
}

xspace::XPlaneBuilder& ActivityConverter::host_plane(std::string_view name,
                                                     std::unique_ptr<xspace::XPlaneBuilder>& slot) {
  if (!slot) slot = std::make_unique<xspace::XPlaneBuilder>(xspace::find_or_add_plane(space_, name));
  return *slot;
}

// `kind` is always one of the string literals above, so the set may keep views of it.
xspace::XLineBuilder ActivityConverter::stream_line(uint32_t device, uint32_t stream, std::string_view kind) {
  stream_kinds_[{device, stream}].insert(kind);
  return gpu_plane(device).line(stream, "");  // named at finish(), once all its kinds are known
}

void ActivityConverter::add(const CUpti_Activity& record) {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_DEVICE: add_device(reinterpret_cast<const CUpti_ActivityDevice5&>(record)); break;
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      add_kernel(reinterpret_cast<const CUpti_ActivityKernel10&>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: add_memcpy(reinterpret_cast<const CUpti_ActivityMemcpy6&>(record)); break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2: add_memcpy_p2p(reinterpret_cast<const CUpti_ActivityMemcpyPtoP4&>(record)); break;
    case CUPTI_ACTIVITY_KIND_MEMSET: add_memset(reinterpret_cast<const CUpti_ActivityMemset4&>(record)); break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      add_sync(reinterpret_cast<const CUpti_ActivitySynchronization2&>(record));
      break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: add_api(reinterpret_cast<const CUpti_ActivityAPI&>(record)); break;
    case CUPTI_ACTIVITY_KIND_MEMORY2: add_memory(reinterpret_cast<const CUpti_ActivityMemory4&>(record)); break;
    default: ++ignored_; return;
  }
  ++converted_;
}

const ActivityConverter::KernelName& ActivityConverter::kernel_name(uint32_t device, const char* mangled) {
  auto [it, inserted] = kernel_names_.try_emplace({device, mangled});
  if (inserted) {
    const std::string name = demangle(mangled);
    it->second = {gpu_plane(device).event_metadata_id(name), nccl_collective(name)};
  }
  return it->second;
}

void ActivityConverter::add_device(const CUpti_ActivityDevice5& d) {
  device_limits_[d.id] = {d.numThreadsPerWarp, d.maxWarpsPerMultiprocessor, d.maxBlocksPerMultiprocessor,
                          d.maxRegistersPerMultiprocessor, d.maxSharedMemoryPerMultiprocessor};
}

void ActivityConverter::add_kernel(const CUpti_ActivityKernel10& k) {
  const KernelName& name = kernel_name(k.deviceId, k.name);
  auto stats = stream_line(k.deviceId, k.streamId, "Compute")
                   .add_event(name.metadata_id, to_host(k.start), duration(k.start, k.end));
  // TF's current kernel_details form; occ_pct only where the device's limits are known.
  std::string details = absl::StrCat("regs:", k.registersPerThread, " static_shared:", k.staticSharedMemory,
                                     " dynamic_shared:", k.dynamicSharedMemory, " grid:", k.gridX, ",", k.gridY, ",",
                                     k.gridZ, " block:", k.blockX, ",", k.blockY, ",", k.blockZ);
  if (auto limits = device_limits_.find(k.deviceId); limits != device_limits_.end()) {
    auto extent = [](int32_t d) { return static_cast<uint64_t>(std::max(d, 0)); };
    const uint64_t threads = extent(k.blockX) * extent(k.blockY) * extent(k.blockZ);
    if (const auto occupancy =
            theoretical_occupancy_pct(limits->second, static_cast<uint32_t>(std::min<uint64_t>(threads, UINT32_MAX)),
                                      k.registersPerThread, k.staticSharedMemory + k.dynamicSharedMemory)) {
      absl::StrAppend(&details, " occ_pct:", absl::StrFormat("%.1f", *occupancy));
    }
  }
  stats.add(xspace::kKernelDetailsStat, details);
  stats.add(xspace::kCorrelationIdStat, int64_t{k.correlationId});
  stats.add(xspace::kContextIdStat, int64_t{k.contextId});
  stats.add(xspace::kStreamIdStat, int64_t{k.streamId});
  if (!name.collective.empty()) stats.add(xspace::kCollectiveStat, name.collective);
}

void ActivityConverter::add_memcpy(const CUpti_ActivityMemcpy6& m) {
  const std::string_view kind = memcpy_kind(m.copyKind);
  auto stats = stream_line(m.deviceId, m.streamId, kind).add_event(kind, to_host(m.start), duration(m.start, m.end));
  stats.add(kMemcpyDetailsStat, memcpy_details(m, m.deviceId));
  add_transfer_stats(stats, m);
}

void ActivityConverter::add_memcpy_p2p(const CUpti_ActivityMemcpyPtoP4& m) {
  auto stats = stream_line(m.deviceId, m.streamId, "MemcpyP2P")
                   .add_event("MemcpyP2P", to_host(m.start), duration(m.start, m.end));
  stats.add(kMemcpyDetailsStat, memcpy_details(m, m.dstDeviceId));
  add_transfer_stats(stats, m);
}

void ActivityConverter::add_memset(const CUpti_ActivityMemset4& m) {
  auto stats =
      stream_line(m.deviceId, m.streamId, "Memset").add_event("Memset", to_host(m.start), duration(m.start, m.end));
  stats.add(kMemsetDetailsStat, "kind:" + std::string(memory_kind(static_cast<uint8_t>(m.memoryKind))) +
                                    " size:" + std::to_string(m.bytes) +
                                    " async:" + ((m.flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) ? "1" : "0"));
  add_transfer_stats(stats, m);
}

void ActivityConverter::add_sync(const CUpti_ActivitySynchronization2& s) {
  // Synchronization is the host waiting for the device: it goes with the API calls, on its own line.
  auto stats = host_plane(xspace::kCuptiHostPlaneName, cupti_plane_)
                   .line_named("Synchronization")
                   .add_event(sync_name(s.type), to_host(s.start), duration(s.start, s.end));
  stats.add(xspace::kCorrelationIdStat, int64_t{s.correlationId});
  stats.add(xspace::kContextIdStat, int64_t{s.contextId});
  if (s.streamId != CUPTI_SYNCHRONIZATION_INVALID_VALUE) stats.add(xspace::kStreamIdStat, int64_t{s.streamId});
}

void ActivityConverter::add_api(const CUpti_ActivityAPI& a) {
  auto line =
      host_plane(xspace::kCuptiHostPlaneName, cupti_plane_).line(a.threadId, "Thread " + std::to_string(a.threadId));
  auto stats = line.add_event(api_name_(a.kind, a.cbid), to_host(a.start), duration(a.start, a.end));
  stats.add(xspace::kCorrelationIdStat, int64_t{a.correlationId});
  if (a.returnValue != 0) stats.add("return_value", int64_t{a.returnValue});
}

void ActivityConverter::add_memory(const CUpti_ActivityMemory4& m) {
  const bool allocation = m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  if (!allocation && m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
    ++ignored_;
    return;
  }
  // Copies: the record's fields are packed, and references to them would be misaligned.
  const uint32_t device = m.deviceId, kind = m.memoryKind, pid = m.processId;
  xspace::XPlaneBuilder& plane = gpu_plane(device);
  auto it = allocators_.find({device, kind});
  if (it == allocators_.end()) {
    const std::string name =
        "GPU_" + std::to_string(device) + "_cuda_" + std::string(memory_kind(static_cast<uint8_t>(kind)));
    it = allocators_.try_emplace({device, kind}, name, plane).first;
  }
  auto line = plane.line_named(std::string(xspace::kMemoryAllocationsLinePrefix) + " pid " + std::to_string(pid));
  auto stats = allocation ? it->second.allocate(line, to_host(m.timestamp), m.address, static_cast<int64_t>(m.bytes))
                          : it->second.free(line, to_host(m.timestamp), m.address);
  stats.add(xspace::kCorrelationIdStat, int64_t{m.correlationId});
  if (m.streamId != 0) stats.add(xspace::kStreamIdStat, int64_t{m.streamId});
}

void ActivityConverter::add_nvtx_range(uint32_t thread_id, std::string_view name, int64_t start_ns, int64_t end_ns) {
  host_plane(xspace::kHostPlaneName, cpu_plane_)
      .line_named(std::string(xspace::kNvtxLinePrefix) + std::to_string(thread_id))
      .add_event(name, start_ns, end_ns > start_ns ? end_ns - start_ns : 0);
}

void ActivityConverter::finish(tensorflow::profiler::XSpace& space) {
  for (const auto& [key, kinds] : stream_kinds_) {
    gpu_plane(key.first).line(key.second, "").proto()->set_name(stream_line_name(key.second, kinds));
  }
  for (auto& [device, plane] : gpu_planes_) plane->stats().add(xspace::kDeviceIdStat, int64_t{device});
  uint64_t unknown_releases = 0;
  for (const auto& [key, allocator] : allocators_) unknown_releases += allocator.unknown_frees();
  if (unknown_releases > 0) {
    space_.add_warnings(absl::StrCat("CUPTI: ", unknown_releases,
                                     " memory releases of blocks allocated before the window; the allocators' "
                                     "totals leave them out"));
  }
  allocators_.clear();
  gpu_planes_.clear();
  cupti_plane_.reset();
  cpu_plane_.reset();
  stream_kinds_.clear();
  kernel_names_.clear();
  xspace::merge_space(std::move(space_), space);
  space_.Clear();
}

}  // namespace podscope::cupti
