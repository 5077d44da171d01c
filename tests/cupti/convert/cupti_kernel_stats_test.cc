// From synthetic CUDA 13 activity records through the converter's GPU planes to the kernel stats rows: the
// converter's kernel_details are what the kernel stats read.
#include <gtest/gtest.h>

#include "analysis/tools/kernel_stats.h"
#include "cupti/convert/activity_converter.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/cupti/convert/activity_records.h"

namespace podscope {
namespace {

using testing::as_activity;
using testing::zeroed;

CUpti_ActivityKernel10 kernel(const char* name, uint64_t start, uint64_t end, uint32_t stream, uint32_t grid_x,
                              uint32_t block_x, uint32_t regs, uint32_t dynamic_shared) {
  auto k = zeroed<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.name = name;
  k.start = start;
  k.end = end;
  k.deviceId = 0;
  k.streamId = stream;
  k.gridX = grid_x;
  k.gridY = k.gridZ = 1;
  k.blockX = block_x;
  k.blockY = k.blockZ = 1;
  k.registersPerThread = static_cast<uint16_t>(regs);
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = dynamic_shared;
  return k;
}

TEST(CuptiKernelStats, ConvertedKernelsGiveOneRowPerNameAndLaunchConfiguration) {
  cupti::ActivityConverter converter(0, [](CUpti_ActivityKind, CUpti_CallbackId) { return std::string("api"); });
  const CUpti_ActivityDevice5 device = testing::h100_device();
  converter.add(as_activity(&device));
  const auto records = {
      kernel("sm90_xmma_gemm_f16f16_f32", 1'000, 4'000, 7, 132, 256, 64, 0),
      kernel("sm90_xmma_gemm_f16f16_f32", 10'000, 12'000, 9, 132, 256, 64, 0),  // another stream, same row
      kernel("sm90_xmma_gemm_f16f16_f32", 20'000, 20'500, 7, 66, 256, 64, 0),   // another grid: its own row
      kernel("_Z11relu_kernelPfi", 30'000, 30'400, 7, 1024, 128, 16, 4096),
      kernel("_Z11relu_kernelPfi", 40'000, 40'000, 7, 1024, 128, 16, 4096),  // no duration: not a row's
  };
  for (const auto& k : records) converter.add(as_activity(&k));
  auto copy = zeroed<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.start = 50'000;
  copy.end = 60'000;
  copy.streamId = 7;
  converter.add(as_activity(&copy));
  tensorflow::profiler::XSpace space;
  converter.finish(space);

  analysis::KernelStatsBuilder builder;
  for (const auto& plane : space.planes()) builder.add_plane(plane);
  const analysis::KernelStatsResult result = std::move(builder).finish();
  EXPECT_EQ(result.warnings.corrupt_kernel_details, 0u);
  EXPECT_EQ(result.kernel_launches, 4u);
  EXPECT_EQ(result.kernel_time_ns, 5'900u);
  ASSERT_EQ(result.db.reports_size(), 3);

  const auto& gemm = result.db.reports(0);
  EXPECT_EQ(gemm.name(), "sm90_xmma_gemm_f16f16_f32");
  EXPECT_EQ(gemm.occurrences(), 2u);
  EXPECT_EQ(gemm.total_duration_ns(), 5'000u);
  EXPECT_EQ(gemm.min_duration_ns(), 2'000u);
  EXPECT_EQ(gemm.max_duration_ns(), 3'000u);
  EXPECT_EQ(gemm.grid_dim(0), 132u);
  EXPECT_EQ(gemm.block_dim(0), 256u);
  EXPECT_EQ(gemm.registers_per_thread(), 64u);
  EXPECT_EQ(gemm.static_shmem_bytes(), 1024u);
  EXPECT_EQ(gemm.dynamic_shmem_bytes(), 0u);
  EXPECT_FLOAT_EQ(gemm.occupancy_pct(), 50.0f);  // 4 blocks of 8 warps by registers
  EXPECT_TRUE(gemm.is_kernel_using_tensor_core());
  EXPECT_EQ(gemm.op_name(), "");  // no op stat on a CUPTI kernel

  EXPECT_EQ(result.db.reports(1).grid_dim(0), 66u);
  EXPECT_EQ(result.db.reports(1).total_duration_ns(), 500u);

  const auto& relu = result.db.reports(2);
  EXPECT_EQ(relu.name(), "relu_kernel(float*, int)");  // demangled by the converter
  EXPECT_EQ(relu.occurrences(), 1u);
  EXPECT_EQ(relu.dynamic_shmem_bytes(), 4096u);
  EXPECT_FALSE(relu.is_kernel_using_tensor_core());
  EXPECT_FLOAT_EQ(relu.occupancy_pct(), 100.0f);  // 16 blocks of 4 warps
}

}  // namespace
}  // namespace podscope
