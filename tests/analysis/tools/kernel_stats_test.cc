// GPU kernel stats: both kernel_details forms, folding by launch configuration and op, the top-N cut, bad
// details, and TensorFlow's real 8-GPU file.
#include "analysis/tools/kernel_stats.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"
#include "proto/xspace/xspace_stream_reader.h"
#include "tests/analysis/stream_time.h"
#include "tests/shared_testdata.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::KernelReport;
using tensorflow::profiler::XPlane;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;

// A GPU plane with one compute stream line; `add` puts a kernel on it.
struct GpuPlane {
  XPlane plane;
  xspace::XPlaneBuilder builder{&plane};
  xspace::XLineBuilder stream = builder.line(7, "Stream #7(Compute)");

  GpuPlane() { plane.set_name(std::string(xspace::kGpuPlanePrefix) + "0"); }
  xspace::XStatsBuilder add(std::string_view kernel, int64_t start, int64_t duration, std::string_view details) {
    auto stats = stream.add_event(kernel, kT0 + start, duration);
    if (!details.empty()) stats.add("kernel_details", details);
    return stats;
  }
};

TEST(KernelDetailsTest, ParsesTheCurrentForm) {
  const auto k = parse_kernel_details(
      "regs:32 static_shared:1024 dynamic_shared:2048 grid:4096,2,1 block:256,1,1 "
      "occ_pct:62.5");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->registers_per_thread, 32u);
  EXPECT_EQ(k->static_shmem_bytes, 1024u);
  EXPECT_EQ(k->dynamic_shmem_bytes, 2048u);
  EXPECT_EQ(k->grid, (std::array<uint32_t, 3>{4096, 2, 1}));
  EXPECT_EQ(k->block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_FLOAT_EQ(k->occupancy_pct, 62.5f);
}

TEST(KernelDetailsTest, ParsesTheOlderFormWithItsSharedMemoryAsStatic) {
  const auto k = parse_kernel_details("regs:38 shm:512 grid:160,1,1 block:1024,1,1");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->registers_per_thread, 38u);
  EXPECT_EQ(k->static_shmem_bytes, 512u);
  EXPECT_EQ(k->dynamic_shmem_bytes, 0u);
  EXPECT_EQ(k->grid, (std::array<uint32_t, 3>{160, 1, 1}));
  EXPECT_EQ(k->block, (std::array<uint32_t, 3>{1024, 1, 1}));
  EXPECT_EQ(k->occupancy_pct, 0.0f);
}

TEST(KernelDetailsTest, SkipsUnknownFieldsAndRejectsMalformedOnes) {
  EXPECT_TRUE(parse_kernel_details("regs:8 grid:1,1,1 block:32,1,1 cluster:2,1,1"));
  EXPECT_FALSE(parse_kernel_details(""));
  EXPECT_FALSE(parse_kernel_details("garbage"));
  EXPECT_FALSE(parse_kernel_details("regs:x grid:1,1,1"));
  EXPECT_FALSE(parse_kernel_details("regs:8 grid:1,1 block:32,1,1"));
  EXPECT_FALSE(parse_kernel_details("regs:17179869185 grid:1,1,1"));  // beyond 32 bits
  EXPECT_FALSE(parse_kernel_details("regs:8 occ_pct:250"));
}

TEST(KernelNamesTest, TensorCoreKernelsAndEligibleOpsFollowXProfsLists) {
  EXPECT_TRUE(kernel_name_suggests_tensor_core("volta_h884gemm_64x64_ldg8_nn"));
  EXPECT_TRUE(kernel_name_suggests_tensor_core("sm80_xmma_gemm_f16f16_f16f32"));
  EXPECT_FALSE(kernel_name_suggests_tensor_core("volta_sgemm_128x64_nn"));
  EXPECT_TRUE(op_is_tensor_core_eligible("bert/layer_0/attention/MatMul"));
  EXPECT_TRUE(op_is_tensor_core_eligible("model/conv1/Conv2D"));
  EXPECT_TRUE(op_is_tensor_core_eligible("x/BatchMatMulV2"));
  EXPECT_FALSE(op_is_tensor_core_eligible("x/MatMulSomething"));
  EXPECT_FALSE(op_is_tensor_core_eligible("x/Relu"));
  EXPECT_EQ(op_name_of("a/b/MatMul:MatMul"), "a/b/MatMul");
  EXPECT_EQ(op_name_of("a/Relu:Relu#shape=(float[3])#"), "a/Relu");
  EXPECT_EQ(op_name_of("outer:Outer::inner/Add:AddV2"), "inner/Add");
}

TEST(KernelStatsTest, LaunchesWithTheSameConfigurationAndOpFoldIntoOneRow) {
  GpuPlane gpu;
  const std::string details = "regs:32 static_shared:0 dynamic_shared:0 grid:8,1,1 block:128,1,1 occ_pct:50";
  gpu.add("volta_h884gemm", 0, 300, details).add("tf_op", "m/dense/MatMul:MatMul");
  gpu.add("volta_h884gemm", 1000, 100, details).add("tf_op", "m/dense/MatMul:MatMul");
  gpu.add("volta_h884gemm", 2000, 200, "regs:32 static_shared:0 dynamic_shared:0 grid:16,1,1 block:128,1,1")
      .add("tf_op", "m/dense/MatMul:MatMul");
  gpu.add("relu_kernel", 3000, 50, details).add("tf_op", "m/Relu:Relu");
  gpu.add("relu_kernel", 4000, 0, details);  // no duration: not counted, as XProf
  gpu.add("Memcpy", 5000, 70, "");           // not a kernel

  const KernelStatsResult result = xplane_to_kernel_stats(gpu.plane);
  ASSERT_EQ(result.db.reports_size(), 3);
  EXPECT_EQ(result.kernel_launches, 4u);
  EXPECT_EQ(result.kernel_time_ns, 650u);
  const KernelReport& top = result.db.reports(0);  // longest total first
  EXPECT_EQ(top.name(), "volta_h884gemm");
  EXPECT_EQ(top.occurrences(), 2u);
  EXPECT_EQ(top.total_duration_ns(), 400u);
  EXPECT_EQ(top.min_duration_ns(), 100u);
  EXPECT_EQ(top.max_duration_ns(), 300u);
  EXPECT_EQ(top.grid_dim(0), 8u);
  EXPECT_EQ(top.block_dim(0), 128u);
  EXPECT_EQ(top.registers_per_thread(), 32u);
  EXPECT_FLOAT_EQ(top.occupancy_pct(), 50.0f);
  EXPECT_EQ(top.op_name(), "m/dense/MatMul");
  EXPECT_TRUE(top.is_kernel_using_tensor_core());
  EXPECT_TRUE(top.is_op_tensor_core_eligible());
  EXPECT_EQ(result.db.reports(1).grid_dim(0), 16u);  // another grid: another row
  EXPECT_EQ(result.db.reports(2).op_name(), "m/Relu");
  EXPECT_FALSE(result.db.reports(2).is_op_tensor_core_eligible());
}

TEST(KernelStatsTest, OpComesFromTheNewestStatThatNamesIt) {
  GpuPlane gpu;
  const std::string details = "regs:8 shm:0 grid:1,1,1 block:32,1,1";
  gpu.add("k", 0, 10, details).add("level 0", "old/Op:Add").add("annotation", "ignored/Op:Add#a=1#");
  gpu.add("k", 100, 20, details).add("annotation", "scope:Scope::ann/Op:Mul#shape=(f32[2])#");
  gpu.add("k", 200, 30, details).add("tf_op", "new/Op:Sub").add("level 0", "old/Op:Add");
  gpu.add("k", 300, 40, details);
  std::map<std::string, uint64_t> by_op;
  const KernelStatsResult result = xplane_to_kernel_stats(gpu.plane);
  for (const auto& r : result.db.reports()) by_op[r.op_name()] = r.total_duration_ns();
  EXPECT_EQ(by_op, (std::map<std::string, uint64_t>{{"old/Op", 10}, {"ann/Op", 20}, {"new/Op", 30}, {"", 40}}));
}

TEST(KernelStatsTest, CorruptKernelDetailsAreCountedAndTheirTimeStillCounts) {
  GpuPlane gpu;
  gpu.add("k", 0, 10, "regs:8 grid:1,1,1 block:32,1,1");
  gpu.add("k", 100, 20, "regs:eight grid:1,1 block:");
  gpu.add("k", 200, 30, "complete nonsense");
  const KernelStatsResult result = xplane_to_kernel_stats(gpu.plane);
  EXPECT_EQ(result.warnings.corrupt_kernel_details, 2u);
  uint64_t total = 0;
  for (const auto& r : result.db.reports()) total += r.total_duration_ns();
  EXPECT_EQ(total, 60u);
  EXPECT_EQ(result.kernel_time_ns, 60u);
}

TEST(KernelStatsTest, KeepsTheLongestRowsAndCountsTheRestAsCut) {
  GpuPlane gpu;
  for (int i = 0; i < 10; ++i) gpu.add("kernel_" + std::to_string(i), i * 100, 1 + i, "regs:8 grid:1,1,1 block:1,1,1");
  KernelStatsBuilder builder;
  builder.add_plane(gpu.plane);
  const KernelStatsResult result = std::move(builder).finish(3);
  ASSERT_EQ(result.db.reports_size(), 3);
  EXPECT_EQ(result.reports_cut, 7u);
  EXPECT_EQ(result.db.reports(0).name(), "kernel_9");
  EXPECT_EQ(result.db.reports(2).name(), "kernel_7");
  EXPECT_EQ(result.kernel_time_ns, 55u);  // the cut rows' time included
}

TEST(KernelStatsTest, OnlyStreamLinesOfGpuPlanesAreRead) {
  GpuPlane gpu;
  gpu.add("k", 0, 10, "regs:8 grid:1,1,1 block:32,1,1");
  // TF's derived line repeats the kernel's time under the op's name.
  gpu.builder.line_named(xspace::kTensorFlowOpsLineName).add_event("k", kT0, 10).add("kernel_details", "regs:8");
  EXPECT_EQ(xplane_to_kernel_stats(gpu.plane).kernel_time_ns, 10u);
  gpu.plane.set_name(std::string(xspace::kHostPlaneName));
  EXPECT_EQ(xplane_to_kernel_stats(gpu.plane).db.reports_size(), 0);
  EXPECT_TRUE(KernelStatsBuilder::wants_line("/device:GPU:3", "Stream #12(Compute,MemcpyH2D)"));
  EXPECT_FALSE(KernelStatsBuilder::wants_line("/device:GPU:3", "TensorFlow Ops"));
  EXPECT_FALSE(KernelStatsBuilder::wants_line("/host:CPU", "Stream #12(Compute)"));
}

// One file of an annotated process with CUDA: its annotations on `/device:CUSTOM:0` (thread 42), its launch calls on
// `/host:CUPTI` and its kernels on `/device:GPU:0`, correlated by id.
struct AnnotatedCudaFile {
  XPlane custom, cupti;
  GpuPlane gpu;
  xspace::XPlaneBuilder custom_builder{&custom}, cupti_builder{&cupti};

  AnnotatedCudaFile() {
    custom.set_name(std::string(xspace::kCustomPlanePrefix) + "0");
    cupti.set_name(std::string(xspace::kCuptiHostPlaneName));
  }
  void annotate(int64_t thread, std::string_view op, int64_t start, int64_t duration) {
    custom_builder.line(thread, "Thread " + std::to_string(thread)).add_event(op, kT0 + start, duration);
  }
  void launch(int64_t thread, int64_t correlation_id, int64_t at, std::string_view kernel, int64_t kernel_start) {
    cupti_builder.line(thread, "Thread " + std::to_string(thread))
        .add_event("cudaLaunchKernel", kT0 + at, 5)
        .add("correlation_id", correlation_id);
    gpu.add(kernel, kernel_start, 10, "regs:8 grid:1,1,1 block:32,1,1").add("correlation_id", correlation_id);
  }
};

std::map<std::string, std::string> op_of_kernels(const KernelStatsResult& result) {
  std::map<std::string, std::string> ops;
  for (const KernelReport& r : result.db.reports()) ops[r.name()] = r.op_name();
  return ops;
}

TEST(KernelStatsTest, KernelsWithoutAnOpStatTakeTheAnnotationAroundTheirLaunchOnTheSameThread) {
  AnnotatedCudaFile file;
  file.annotate(42, "train_step", 0, 1000);
  file.annotate(42, "matmul", 100, 300);
  file.annotate(42, "relu", 500, 200);
  file.annotate(43, "other_thread_op", 0, 1000);
  file.launch(42, 1, 150, "gemm_kernel", 2000);
  file.launch(42, 2, 550, "relu_kernel", 2100);
  file.launch(42, 3, 800, "copy_kernel", 2200);    // only the step encloses it
  file.launch(44, 4, 150, "orphan_kernel", 2300);  // a thread without annotations
  file.launch(42, 5, 1500, "late_kernel", 2400);   // after every annotation
  // The planes come in any order: kernels first here.
  KernelStatsBuilder builder;
  builder.add_plane(file.gpu.plane);
  builder.add_plane(file.cupti);
  builder.add_plane(file.custom);
  builder.end_file();
  const KernelStatsResult result = std::move(builder).finish();
  const auto ops = op_of_kernels(result);
  EXPECT_EQ(ops.at("gemm_kernel"), "matmul");
  EXPECT_EQ(ops.at("relu_kernel"), "relu");
  EXPECT_EQ(ops.at("copy_kernel"), "train_step");
  EXPECT_EQ(ops.at("orphan_kernel"), "");
  EXPECT_EQ(ops.at("late_kernel"), "");
  EXPECT_EQ(result.launches_attributed_by_correlation, 3u);
  EXPECT_EQ(result.kernel_launches, 5u);
  EXPECT_EQ(result.kernel_time_ns, 50u);
}

TEST(KernelStatsTest, AKernelsOpStatWinsOverItsLaunchsAnnotation) {
  AnnotatedCudaFile file;
  file.annotate(42, "matmul", 100, 300);
  file.launch(42, 1, 150, "gemm_kernel", 2000);
  file.gpu.add("gemm_kernel", 3000, 10, "regs:8 grid:1,1,1 block:32,1,1")
      .add("correlation_id", int64_t{1})
      .add("tf_op", "model/dense/MatMul:MatMul");
  KernelStatsBuilder builder;
  builder.add_plane(file.custom);
  builder.add_plane(file.cupti);
  builder.add_plane(file.gpu.plane);
  const KernelStatsResult result = std::move(builder).finish();
  std::multiset<std::string> ops;
  for (const KernelReport& r : result.db.reports()) ops.insert(r.op_name());
  EXPECT_EQ(ops, (std::multiset<std::string>{"matmul", "model/dense/MatMul"}));
}

TEST(KernelStatsTest, LaunchesOfAnotherFileNeverNameAKernelsOp) {
  AnnotatedCudaFile first, second;
  first.launch(42, 1, 150, "gemm_kernel", 2000);
  second.annotate(42, "matmul", 100, 300);
  second.launch(42, 7, 150, "other_kernel", 2000);
  KernelStatsBuilder builder;
  builder.add_plane(first.gpu.plane);
  builder.end_file();
  builder.add_plane(second.custom);
  second.cupti.mutable_lines(0)->mutable_events(0)->mutable_stats(0)->set_int64_value(1);  // the first's id
  builder.add_plane(second.cupti);
  const KernelStatsResult result = std::move(builder).finish();
  EXPECT_EQ(op_of_kernels(result).at("gemm_kernel"), "");
  EXPECT_EQ(result.launches_attributed_by_correlation, 0u);
}

TEST(KernelStatsTest, TensorFlowFileKernelTotalsSumToTheComputeStreamTime) {
  const auto tf_file = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!tf_file) return;
  std::map<std::string, uint64_t> stream_time, stats_time;
  KernelStatsBuilder pod;
  const absl::Status status = xspace::read_xspace_planes(
      *tf_file,
      [&](const XPlane& plane) {
        if (!plane.name().starts_with(xspace::kGpuPlanePrefix)) return absl::OkStatus();
        stream_time[plane.name()] = static_cast<uint64_t>(testing::stream_time_of(plane).compute_ns);
        const KernelStatsResult one = xplane_to_kernel_stats(plane);
        EXPECT_EQ(one.warnings.corrupt_kernel_details, 0u) << plane.name();
        uint64_t sum = 0;
        for (const auto& r : one.db.reports()) {
          sum += r.total_duration_ns();
          EXPECT_GE(r.max_duration_ns(), r.min_duration_ns());
          EXPECT_EQ(r.grid_dim_size(), 3);
          EXPECT_GT(r.registers_per_thread(), 0u) << r.name();
        }
        stats_time[plane.name()] = sum;
        pod.add_plane(plane);
        return absl::OkStatus();
      },
      nullptr, KernelStatsBuilder::wants_line);
  ASSERT_TRUE(status.ok()) << status;
  for (std::string gpu : {"/device:GPU:4", "/device:GPU:6"}) {
    EXPECT_GT(stream_time[gpu], 0u) << gpu;
    EXPECT_EQ(stats_time[gpu], stream_time[gpu]) << gpu;
  }
  const KernelStatsResult all = std::move(pod).finish();
  EXPECT_EQ(all.kernel_time_ns, stream_time["/device:GPU:4"] + stream_time["/device:GPU:6"]);
  ASSERT_GT(all.db.reports_size(), 0);
  // The real file's kernels carry the op that launched them.
  EXPECT_FALSE(all.db.reports(0).op_name().empty());
  EXPECT_EQ(all.db.reports(0).op_name().find(':'), std::string::npos);
  for (int i = 1; i < all.db.reports_size(); ++i) {
    EXPECT_LE(all.db.reports(i).total_duration_ns(), all.db.reports(i - 1).total_duration_ns());
  }
}

}  // namespace
}  // namespace podscope::analysis
