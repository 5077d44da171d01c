// CUPTI record → XPlane conversion, fed with synthetic CUDA 13 activity records (the structs CUPTI's
// buffers hold), checking each field lands where TensorFlow's GPU tracer puts it.
#include "cupti/convert/activity_converter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "proto/xspace/xplane_reader.h"
#include "tests/cupti/convert/activity_records.h"

namespace podscope::cupti {
namespace {

using tensorflow::profiler::XSpace;

constexpr int64_t kOffset = 1'700'000'000'000'000'000;  // host clock − CUPTI clock

using testing::as_activity;
using testing::zeroed;

std::string api_name(CUpti_ActivityKind kind, CUpti_CallbackId cbid) {
  return (kind == CUPTI_ACTIVITY_KIND_RUNTIME ? "cudaLaunchKernel#" : "cuLaunchKernel#") + std::to_string(cbid);
}

const tensorflow::profiler::XPlane& plane(const XSpace& space, std::string_view name) {
  const auto* p = xspace::find_plane(space, name);
  EXPECT_NE(p, nullptr) << name;
  static const tensorflow::profiler::XPlane empty;
  return p ? *p : empty;
}

std::vector<std::string> line_names(const tensorflow::profiler::XPlane& p) {
  std::vector<std::string> names;
  for (const auto& line : p.lines()) names.push_back(line.name());
  return names;
}

TEST(ActivityConverterTest, KernelLandsOnItsStreamLineWithTfKernelDetails) {
  ActivityConverter converter(kOffset, api_name);
  auto k = zeroed<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.name = "_Z10vector_addPKfS0_Pfi";
  k.start = 5'000;
  k.end = 7'500;
  k.deviceId = 1;
  k.contextId = 3;
  k.streamId = 14;
  k.gridX = 4096;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.registersPerThread = 32;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 2048;
  k.correlationId = 77;
  converter.add(as_activity(&k));
  XSpace space;
  converter.finish(space);

  xspace::XPlaneReader gpu(plane(space, "/device:GPU:1"));
  ASSERT_EQ(gpu.proto().lines_size(), 1);
  const auto& line = gpu.proto().lines(0);
  EXPECT_EQ(line.id(), 14);
  EXPECT_EQ(line.name(), "Stream #14(Compute)");
  ASSERT_EQ(line.events_size(), 1);
  xspace::XEventView e(gpu, line, line.events(0));
  EXPECT_EQ(e.name(), "vector_add(float const*, float const*, float*, int)");
  EXPECT_EQ(e.start_ns(), kOffset + 5'000);  // converted to the host clock
  EXPECT_EQ(e.duration_ns(), 2'500);
  EXPECT_EQ(e.str_stat("kernel_details"), "regs:32 static_shared:1024 dynamic_shared:2048 grid:4096,2,1 block:256,1,1");
  EXPECT_EQ(e.int_stat("correlation_id"), 77);
  EXPECT_EQ(e.int_stat("context_id"), 3);
  EXPECT_EQ(e.int_stat("stream_id"), 14);
  EXPECT_FALSE(e.str_stat("collective"));
  EXPECT_EQ(gpu.int_stat("device_id"), 1);
}

// An H100's multiprocessor: 64 warps, 32 blocks, 64 Ki registers, 228 KiB of shared memory.
MultiprocessorLimits h100_limits() { return {32, 64, 32, 65536, 228 * 1024}; }

TEST(ActivityConverterTest, TheoreticalOccupancyIsBoundByWarpsRegistersAndSharedMemory) {
  EXPECT_DOUBLE_EQ(*theoretical_occupancy_pct(h100_limits(), 256, 32, 3072), 100.0);
  EXPECT_DOUBLE_EQ(*theoretical_occupancy_pct(h100_limits(), 256, 64, 0), 50.0);      // 4 blocks by registers
  EXPECT_DOUBLE_EQ(*theoretical_occupancy_pct(h100_limits(), 256, 32, 65536), 37.5);  // 3 blocks by shared memory
  EXPECT_DOUBLE_EQ(*theoretical_occupancy_pct(h100_limits(), 32, 16, 0), 50.0);       // 32 one-warp blocks
  EXPECT_DOUBLE_EQ(*theoretical_occupancy_pct(h100_limits(), 1024, 255, 0), 0.0);     // does not fit at all
  EXPECT_FALSE(theoretical_occupancy_pct(h100_limits(), 0, 32, 0));
  EXPECT_FALSE(theoretical_occupancy_pct(MultiprocessorLimits{}, 256, 32, 0));
}

TEST(ActivityConverterTest, KernelsOfADeviceWithARecordCarryTheirOccupancy) {
  ActivityConverter converter(kOffset, api_name);
  const CUpti_ActivityDevice5 device = testing::h100_device();
  converter.add(as_activity(&device));
  auto k = zeroed<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.name = "gemm";
  k.start = 100;
  k.end = 200;
  k.gridX = k.gridY = k.gridZ = 1;
  k.blockX = 256;
  k.blockY = k.blockZ = 1;
  k.registersPerThread = 64;
  converter.add(as_activity(&k));
  k.deviceId = 1;  // no record for this device
  converter.add(as_activity(&k));
  XSpace space;
  converter.finish(space);
  for (const auto& [name, details] :
       {std::pair{"/device:GPU:0", "regs:64 static_shared:0 dynamic_shared:0 grid:1,1,1 block:256,1,1 occ_pct:50.0"},
        std::pair{"/device:GPU:1", "regs:64 static_shared:0 dynamic_shared:0 grid:1,1,1 block:256,1,1"}}) {
    xspace::XPlaneReader gpu(plane(space, name));
    ASSERT_EQ(gpu.proto().lines_size(), 1) << name;
    const auto& line = gpu.proto().lines(0);
    EXPECT_EQ(xspace::XEventView(gpu, line, line.events(0)).str_stat("kernel_details"), details);
  }
}

TEST(ActivityConverterTest, MemcpyAndMemsetCarryKindBytesAndShareTheStreamLine) {
  ActivityConverter converter(kOffset, api_name);
  auto h2d = zeroed<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  h2d.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  h2d.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  h2d.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  h2d.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  h2d.bytes = 4 << 20;
  h2d.start = 100;
  h2d.end = 600;
  h2d.streamId = 7;
  h2d.correlationId = 5;
  auto d2h = h2d;
  d2h.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  d2h.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  d2h.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  d2h.flags = 0;
  d2h.start = 700;
  d2h.end = 900;
  d2h.correlationId = 6;
  auto memset = zeroed<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  memset.bytes = 1024;
  memset.start = 50;
  memset.end = 60;
  memset.streamId = 8;
  memset.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  memset.correlationId = 4;
  for (const void* r :
       {static_cast<const void*>(&h2d), static_cast<const void*>(&d2h), static_cast<const void*>(&memset)}) {
    converter.add(as_activity(r));
  }
  XSpace space;
  converter.finish(space);
  xspace::XPlaneReader gpu(plane(space, "/device:GPU:0"));
  EXPECT_THAT(line_names(gpu.proto()),
              ::testing::UnorderedElementsAre("Stream #7(MemcpyH2D,MemcpyD2H)", "Stream #8(Memset)"));
  const auto* line = gpu.find_line("Stream #7(MemcpyH2D,MemcpyD2H)");
  ASSERT_NE(line, nullptr);
  ASSERT_EQ(line->events_size(), 2);
  xspace::XEventView first(gpu, *line, line->events(0));
  EXPECT_EQ(first.name(), "MemcpyH2D");
  EXPECT_EQ(first.str_stat("memcpy_details"), "kind_src:pinned kind_dst:device size:4194304 dest:0 async:1");
  EXPECT_EQ(first.int_stat("bytes"), 4 << 20);
  EXPECT_EQ(first.int_stat("correlation_id"), 5);
  xspace::XEventView second(gpu, *line, line->events(1));
  EXPECT_EQ(second.name(), "MemcpyD2H");
  EXPECT_EQ(second.str_stat("memcpy_details"), "kind_src:device kind_dst:pageable size:4194304 dest:0 async:0");
  EXPECT_EQ(second.start_ns(), kOffset + 700);
  const auto* ms = gpu.find_line("Stream #8(Memset)");
  ASSERT_NE(ms, nullptr);
  xspace::XEventView m(gpu, *ms, ms->events(0));
  EXPECT_EQ(m.name(), "Memset");
  EXPECT_EQ(m.str_stat("memset_details"), "kind:device size:1024 async:0");
  EXPECT_EQ(m.int_stat("bytes"), 1024);
}

TEST(ActivityConverterTest, MemoryRecordsBecomeAllocatorEventsPerDeviceAndMemoryKindWithRunningTotals) {
  static_assert(sizeof(CUpti_ActivityMemory4) == 128, "CUDA 13's CUpti_ActivityMemory4 layout");
  ActivityConverter converter(kOffset, api_name);
  auto memory = [](CUpti_ActivityMemoryOperationType op, CUpti_ActivityMemoryKind kind, uint32_t device,
                   uint64_t address, uint64_t bytes, uint64_t timestamp) {
    auto m = zeroed<CUpti_ActivityMemory4>(CUPTI_ACTIVITY_KIND_MEMORY2);
    m.memoryOperationType = op;
    m.memoryKind = kind;
    m.deviceId = device;
    m.address = address;
    m.bytes = bytes;
    m.timestamp = timestamp;
    m.processId = 4242;
    m.correlationId = static_cast<uint32_t>(timestamp);
    return m;
  };
  constexpr auto kAlloc = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  constexpr auto kRelease = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  const CUpti_ActivityMemory4 records[] = {
      memory(kRelease, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 1, 0x9000, 64, 5),  // allocated before the window
      memory(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 1, 0x1000, 1 << 20, 10),
      memory(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 1, 0x200000, 3 << 20, 20),
      memory(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 1, 0x7f0000, 4096, 25),
      memory(kRelease, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 1, 0x1000, 1 << 20, 30),
  };
  for (const auto& r : records) converter.add(as_activity(&r));
  XSpace space;
  converter.finish(space);
  xspace::XPlaneReader gpu(plane(space, "/device:GPU:1"));
  const auto* line = gpu.find_line("Memory Allocations pid 4242");
  ASSERT_NE(line, nullptr);
  ASSERT_EQ(line->events_size(), 5);
  struct Expected {
    std::string_view name, allocator;
    int64_t time, address, bytes, live, peak;
  };
  const Expected expected[] = {
      {"MemoryDeallocation", "GPU_1_cuda_device", 5, 0x9000, 0, 0, 0},
      {"MemoryAllocation", "GPU_1_cuda_device", 10, 0x1000, 1 << 20, 1 << 20, 1 << 20},
      {"MemoryAllocation", "GPU_1_cuda_device", 20, 0x200000, 3 << 20, 4 << 20, 4 << 20},
      {"MemoryAllocation", "GPU_1_cuda_pinned", 25, 0x7f0000, 4096, 4096, 4096},
      {"MemoryDeallocation", "GPU_1_cuda_device", 30, 0x1000, 1 << 20, 3 << 20, 4 << 20},
  };
  for (int i = 0; i < line->events_size(); ++i) {
    xspace::XEventView e(gpu, *line, line->events(i));
    const Expected& x = expected[i];
    EXPECT_EQ(e.name(), x.name) << i;
    EXPECT_EQ(e.start_ns(), kOffset + x.time) << i;
    EXPECT_EQ(e.str_stat("allocator_name"), x.allocator) << i;
    EXPECT_EQ(e.int_stat("addr"), x.address) << i;
    EXPECT_EQ(e.int_stat("allocation_bytes"), x.bytes) << i;
    EXPECT_EQ(e.int_stat("requested_bytes"), x.bytes) << i;
    EXPECT_EQ(e.int_stat("bytes_allocated"), x.live) << i;
    EXPECT_EQ(e.int_stat("peak_bytes_in_use"), x.peak) << i;
    EXPECT_EQ(e.int_stat("bytes_reserved"), 0) << i;
    EXPECT_EQ(e.int_stat("correlation_id"), x.time) << i;
  }
  EXPECT_THAT(
      space.warnings(),
      ::testing::Contains(::testing::HasSubstr("CUPTI: 1 memory releases of blocks allocated before the window")));
  EXPECT_EQ(converter.converted(), 5u);
}

TEST(ActivityConverterTest, ApiCallsGoToHostCuptiPerThreadWithTheSameCorrelationIds) {
  ActivityConverter converter(kOffset, api_name);
  auto api = zeroed<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  api.cbid = 211;
  api.start = 10;
  api.end = 40;
  api.threadId = 4242;
  api.correlationId = 77;
  auto driver = api;
  driver.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  driver.cbid = 307;
  driver.threadId = 4343;
  driver.correlationId = 78;
  converter.add(as_activity(&api));
  converter.add(as_activity(&driver));
  auto sync = zeroed<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sync.start = 50;
  sync.end = 90;
  sync.streamId = 7;
  sync.correlationId = 79;
  converter.add(as_activity(&sync));
  XSpace space;
  converter.finish(space);

  xspace::XPlaneReader host(plane(space, "/host:CUPTI"));
  const auto* thread = host.find_line("Thread 4242");
  ASSERT_NE(thread, nullptr);
  EXPECT_EQ(thread->id(), 4242);
  xspace::XEventView launch(host, *thread, thread->events(0));
  EXPECT_EQ(launch.name(), "cudaLaunchKernel#211");
  EXPECT_EQ(launch.int_stat("correlation_id"), 77);
  EXPECT_EQ(launch.start_ns(), kOffset + 10);
  EXPECT_EQ(launch.duration_ns(), 30);
  ASSERT_NE(host.find_line("Thread 4343"), nullptr);
  const auto* syncs = host.find_line("Synchronization");
  ASSERT_NE(syncs, nullptr);
  xspace::XEventView s(host, *syncs, syncs->events(0));
  EXPECT_EQ(s.name(), "cudaStreamSynchronize");
  EXPECT_EQ(s.int_stat("stream_id"), 7);
}

TEST(ActivityConverterTest, NcclKernelsAreMarkedAsCollectives) {
  ActivityConverter converter(kOffset, api_name);
  auto k = zeroed<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_KERNEL);
  k.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  k.start = 1;
  k.end = 2;
  k.streamId = 30;
  converter.add(as_activity(&k));
  XSpace space;
  converter.finish(space);
  xspace::XPlaneReader gpu(plane(space, "/device:GPU:0"));
  const auto& line = gpu.proto().lines(0);
  xspace::XEventView e(gpu, line, line.events(0));
  EXPECT_EQ(e.str_stat("collective"), "AllReduce");
  EXPECT_EQ(nccl_collective("ncclKernel_AllGather_RING_LL_Sum_int8_t"), "AllGather");
  EXPECT_EQ(nccl_collective("vector_add"), "");
}

TEST(ActivityConverterTest, NvtxRangesBecomeHostEventsPerThreadAndOtherKindsAreCounted) {
  ActivityConverter converter(kOffset, api_name);
  converter.add_nvtx_range(99, "forward", kOffset + 10, kOffset + 110);
  auto marker = zeroed<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_MARKER);
  converter.add(as_activity(&marker));
  EXPECT_EQ(converter.ignored(), 1u);
  converter.add_warning("CUPTI: cuptiActivityEnable(CONCURRENT_KERNEL) failed: CUPTI_ERROR_UNKNOWN (999)");
  XSpace space;
  converter.finish(space);
  xspace::XPlaneReader cpu(plane(space, "/host:CPU"));
  const auto* line = cpu.find_line("NVTX thread 99");
  ASSERT_NE(line, nullptr);
  xspace::XEventView e(cpu, *line, line->events(0));
  EXPECT_EQ(e.name(), "forward");
  EXPECT_EQ(e.duration_ns(), 100);
  EXPECT_THAT(space.warnings(), ::testing::ElementsAre(::testing::HasSubstr("(999)")));
}

TEST(ActivityConverterTest, StreamLineNamesFollowTfKindOrder) {
  EXPECT_EQ(stream_line_name(3, {"Memset", "Compute", "MemcpyD2H"}), "Stream #3(Compute,MemcpyD2H,Memset)");
  EXPECT_EQ(stream_line_name(4, {"MemcpyH2A", "MemcpyH2D"}), "Stream #4(MemcpyH2D,MemcpyH2A)");
}

}  // namespace
}  // namespace podscope::cupti
