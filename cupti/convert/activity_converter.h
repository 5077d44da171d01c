// CUPTI activity records → XPlanes, laid out as TensorFlow's GPU tracer lays them out so that XProf,
// TensorBoard and podscope's analysis read them alike:
//   /device:GPU:<ordinal>  one line per stream, "Stream #<id>(<kinds>)"; kernels with `kernel_details`
//                          (regs, shared memory, grid, block, and the theoretical occupancy once the device's
//                          record has told its multiprocessor limits), memcpy/memset with `memcpy_details` /
//                          `memset_details` and bytes; correlation, context and stream ids on every event;
//                          NCCL kernels carry a `collective` stat. Memory allocations and releases (CUPTI's
//                          memory records) as TensorFlow's allocator events, one allocator per device and memory
//                          kind ("GPU_0_cuda_device"), on a line per process ("Memory Allocations pid <P>").
//   /host:CUPTI            runtime/driver API calls, one line per thread, with the same correlation ids.
//   /host:CPU              NVTX ranges, one line per thread.
// A pure library (no CUPTI calls): the injection feeds it records, tests feed it synthetic ones.
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "proto/xspace/allocator_events.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::cupti {

// What one multiprocessor of a device holds at most (from its CUPTI device record).
struct MultiprocessorLimits {
  uint32_t threads_per_warp = 32;
  uint32_t warps = 0;
  uint32_t blocks = 0;
  uint32_t registers = 0;
  uint32_t shared_memory_bytes = 0;
};

// The theoretical occupancy of a launch in percent: resident warps over the multiprocessor's maximum, with the
// resident blocks bounded by warps, blocks, registers and shared memory (allocation granularities ignored, so
// it can be a little above what the hardware achieves). Nullopt when the limits or the block are empty.
std::optional<double> theoretical_occupancy_pct(const MultiprocessorLimits& limits, uint32_t threads_per_block,
                                                uint32_t registers_per_thread, uint32_t shared_memory_per_block);

// Names an API record's callback id (the injection asks cuptiGetCallbackName).
using ApiNameFn = std::function<std::string(CUpti_ActivityKind kind, CUpti_CallbackId cbid)>;

class ActivityConverter {
 public:
  // CUPTI timestamps are on CUPTI's own clock; `host_minus_cupti_ns` is what to add to reach the host's
  // Unix-ns clock (measured by the injection as realtime − cuptiGetTimestamp at enable time).
  ActivityConverter(int64_t host_minus_cupti_ns, ApiNameFn api_name);

  // Converts one record. Kinds podscope does not trace are counted in `ignored()`.
  void add(const CUpti_Activity& record);
  // An NVTX range, already on the host clock.
  void add_nvtx_range(uint32_t thread_id, std::string_view name, int64_t start_ns, int64_t end_ns);
  void add_warning(std::string warning) { space_.add_warnings(std::move(warning)); }

  // Moves everything converted so far into `space` (merged with what is there) and starts afresh.
  void finish(tensorflow::profiler::XSpace& space);

  uint64_t converted() const { return converted_; }
  uint64_t ignored() const { return ignored_; }

 private:
  void add_device(const CUpti_ActivityDevice5& d);
  void add_kernel(const CUpti_ActivityKernel10& k);
  void add_memcpy(const CUpti_ActivityMemcpy6& m);
  void add_memcpy_p2p(const CUpti_ActivityMemcpyPtoP4& m);
  void add_memset(const CUpti_ActivityMemset4& m);
  void add_sync(const CUpti_ActivitySynchronization2& s);
  void add_api(const CUpti_ActivityAPI& a);
  void add_memory(const CUpti_ActivityMemory4& m);
  xspace::XPlaneBuilder& gpu_plane(uint32_t device);
  xspace::XPlaneBuilder& host_plane(std::string_view name, std::unique_ptr<xspace::XPlaneBuilder>& slot);
  // The stream's line on the device plane; remembers what kinds of work it carried for its name.
  xspace::XLineBuilder stream_line(uint32_t device, uint32_t stream, std::string_view kind);
  // A kernel's event metadata on its device's plane, resolved once per name: CUPTI hands out the same
  // name pointer for every launch of a function, and demangling per record would dominate the cost.
  struct KernelName {
    int64_t metadata_id;
    std::string collective;
  };
  const KernelName& kernel_name(uint32_t device, const char* mangled);
  int64_t to_host(uint64_t cupti_ns) const { return static_cast<int64_t>(cupti_ns) + offset_ns_; }
  static int64_t duration(uint64_t start, uint64_t end) { return end > start ? int64_t(end - start) : 0; }

  const int64_t offset_ns_;
  const ApiNameFn api_name_;
  tensorflow::profiler::XSpace space_;
  std::map<uint32_t, std::unique_ptr<xspace::XPlaneBuilder>> gpu_planes_;
  std::map<uint32_t, MultiprocessorLimits> device_limits_;
  std::unique_ptr<xspace::XPlaneBuilder> cupti_plane_;
  std::unique_ptr<xspace::XPlaneBuilder> cpu_plane_;
  absl::flat_hash_map<std::pair<uint32_t, uint32_t>, std::set<std::string_view>> stream_kinds_;
  absl::flat_hash_map<std::pair<uint32_t, const char*>, KernelName> kernel_names_;
  std::map<std::pair<uint32_t, uint32_t>, xspace::AllocatorEvents> allocators_;  // by device and memory kind
  uint64_t converted_ = 0;
  uint64_t ignored_ = 0;
};

// "Stream #<id>(<kinds>)" with kinds in TF's order (Compute, MemcpyH2D, MemcpyD2H, MemcpyD2D, MemcpyP2P,
// Memset), comma-separated.
std::string stream_line_name(uint32_t stream, const std::set<std::string_view>& kinds);
// The collective an NCCL kernel runs ("AllReduce" for ncclDevKernel_AllReduce_Sum_f32_RING_LL), or ""
// when the kernel is not NCCL's.
std::string nccl_collective(std::string_view kernel_name);

}  // namespace podscope::cupti
