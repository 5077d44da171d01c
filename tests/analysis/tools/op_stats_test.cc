// Framework op stats: self time under nesting, ops from TF op stats and from annotations, the roofline's bound,
// host ops by their TraceMe names, fractions with and without idle, the per-side cut, bad input, and TensorFlow's
// real 8-GPU file.
#include "analysis/tools/op_stats.h"

#include <gtest/gtest.h>

#include <map>

#include "analysis/steps/op_classifier.h"
#include "analysis/tools/tool_pages.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"
#include "proto/xspace/xspace_stream_reader.h"
#include "tests/analysis/stream_time.h"
#include "tests/shared_testdata.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::TfStatsRecord;
using tensorflow::profiler::TfStatsTable;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;

XPlane& add_plane(XSpace& space, std::string_view name) {
  XPlane& plane = *space.add_planes();
  plane.set_name(std::string(name));
  return plane;
}

const TfStatsRecord* find_record(const TfStatsTable& table, std::string_view side, std::string_view name) {
  for (const TfStatsRecord& r : table.tf_stats_record()) {
    if (r.host_or_device() == side && r.op_name() == name) return &r;
  }
  return nullptr;
}

TEST(TfOpFullnameTest, AcceptsNameColonTypeOnly) {
  const auto op = parse_tf_op_fullname("bert/layer_0/attention/MatMul:MatMul");
  ASSERT_TRUE(op);
  EXPECT_EQ(op->name, "bert/layer_0/attention/MatMul");
  EXPECT_EQ(op->type, "MatMul");
  EXPECT_TRUE(parse_tf_op_fullname("n/_2:_Send"));
  EXPECT_FALSE(parse_tf_op_fullname("ExecutorState::Process"));
  EXPECT_FALSE(parse_tf_op_fullname("Iterator::Prefetch::Generator"));
  EXPECT_FALSE(parse_tf_op_fullname("MemoryAllocation"));
  EXPECT_FALSE(parse_tf_op_fullname(":MatMul"));
  EXPECT_FALSE(parse_tf_op_fullname("x:"));
  EXPECT_FALSE(parse_tf_op_fullname("RemoteCall: Instantiate: __inference_f on /job:worker"));
}

TEST(OpStatsTest, AnnotatedCoreOpsTakeTheirKindAsTypeAndLoseNestedTimeFromSelf) {
  XSpace space;
  XPlane& plane = add_plane(space, std::string(xspace::kCustomPlanePrefix) + "0");
  xspace::XPlaneBuilder b(&plane);
  b.line_named(xspace::kStepsLineName).add_event("1", kT0, 1000).add(xspace::kStepNumStat, int64_t{1});
  auto thread = b.line(1, "Thread 1");
  thread.add_event("fusion.1", kT0, 100).add(xspace::kFlopsStat, int64_t{1000}).add(xspace::kBytesStat, int64_t{10});
  thread.add_event("all-reduce", kT0 + 20, 30);
  thread.add_event("fusion.1", kT0 + 200, 100).add(xspace::kFlopsStat, int64_t{1000});

  const OpStatsResult result = xspace_to_op_stats(space);
  const TfStatsTable& table = result.db.without_idle();
  const TfStatsRecord* fusion = find_record(table, "Device", "fusion.1");
  const TfStatsRecord* all_reduce = find_record(table, "Device", "all-reduce");
  ASSERT_TRUE(fusion && all_reduce);
  EXPECT_EQ(fusion->op_type(), op_kind_name(OpKind::kHighFlopsCompute));
  EXPECT_EQ(all_reduce->op_type(), op_kind_name(OpKind::kCollective));
  EXPECT_EQ(fusion->occurrences(), 2);
  EXPECT_DOUBLE_EQ(fusion->total_time_in_us(), 0.2);
  EXPECT_DOUBLE_EQ(fusion->total_self_time_in_us(), 0.17);
  EXPECT_DOUBLE_EQ(all_reduce->total_self_time_in_us(), 0.03);
  // FLOPs over the total time (they include the nested op's): 2000 FLOPs in 200 ns = 10 GFLOP/s.
  EXPECT_DOUBLE_EQ(fusion->measured_flop_rate(), 10);
  EXPECT_DOUBLE_EQ(fusion->operational_intensity(), 200);
  EXPECT_EQ(fusion->bound_by(), "unknown");  // no capability stats on the plane
  EXPECT_EQ(fusion->rank(), 1u);
  EXPECT_DOUBLE_EQ(fusion->device_total_self_time_as_fraction(), 0.85);
  EXPECT_DOUBLE_EQ(all_reduce->device_cumulative_total_self_time_as_fraction(), 1.0);
  EXPECT_EQ(result.device_self_ns, 200);
  ASSERT_EQ(result.planes.size(), 1u);
  EXPECT_EQ(result.planes[0].busy_ns, 200);
  EXPECT_EQ(result.planes[0].span_ns, 300);
  EXPECT_EQ(result.device_idle_ns, 100);
  EXPECT_EQ(result.db.device_type(), "CUSTOM");

  // With idle, the idle row is one of the device's rows and the fractions count it.
  const TfStatsRecord* idle = find_record(result.db.with_idle(), "Device", kIdleOpName);
  ASSERT_TRUE(idle);
  EXPECT_DOUBLE_EQ(idle->total_self_time_in_us(), 0.1);
  EXPECT_DOUBLE_EQ(idle->device_total_self_time_as_fraction(), 1.0 / 3);
  const TfStatsRecord* fusion_with_idle = find_record(result.db.with_idle(), "Device", "fusion.1");
  ASSERT_TRUE(fusion_with_idle);
  EXPECT_DOUBLE_EQ(fusion_with_idle->device_total_self_time_as_fraction(), 170.0 / 300);
  EXPECT_FALSE(find_record(table, "Device", kIdleOpName));
}

// A GPU plane with one compute stream; `kernel` adds a kernel launched by `tf_op` ("" for none).
struct GpuPlane {
  XSpace space;
  XPlane& plane = add_plane(space, std::string(xspace::kGpuPlanePrefix) + "0");
  xspace::XPlaneBuilder builder{&plane};
  xspace::XLineBuilder stream = builder.line(7, "Stream #7(Compute)");

  xspace::XStatsBuilder kernel(std::string_view name, int64_t start, int64_t duration, std::string_view tf_op) {
    auto stats = stream.add_event(name, kT0 + start, duration);
    stats.add("kernel_details", "regs:32 grid:1,1,1 block:32,1,1");
    if (!tf_op.empty()) stats.add("tf_op", tf_op);
    return stats;
  }
};

TEST(OpStatsTest, GpuKernelsCountForTheirTfOpAndAreBoundByTheRooflineOfTheDevicePeaks) {
  GpuPlane gpu;
  // Ridge point: 100 TFLOP/s over 1000 GB/s = 100 FLOPs per byte.
  gpu.builder.stats().add("peak_teraflops_per_second", 100.0).add("peak_hbm_bw_gigabytes_per_second", 1000.0);
  gpu.kernel("volta_h884gemm", 0, 1'000'000, "model/dense/MatMul:MatMul")
      .add(xspace::kFlopsStat, int64_t{1'000'000'000})
      .add("bytes_accessed", int64_t{1'000'000});
  gpu.kernel("elementwise", 2'000'000, 1'000'000, "model/dense/Relu:Relu")
      .add(xspace::kFlopsStat, int64_t{1'000'000})
      .add("bytes_accessed", int64_t{1 << 30});
  gpu.kernel("orphan_kernel", 4'000'000, 500, "");

  const OpStatsResult result = xspace_to_op_stats(gpu.space);
  const TfStatsTable& table = result.db.without_idle();
  const TfStatsRecord* matmul = find_record(table, "Device", "model/dense/MatMul");
  const TfStatsRecord* relu = find_record(table, "Device", "model/dense/Relu");
  const TfStatsRecord* orphan = find_record(table, "Device", "orphan_kernel");
  ASSERT_TRUE(matmul && relu && orphan);
  EXPECT_EQ(matmul->op_type(), "MatMul");
  EXPECT_DOUBLE_EQ(matmul->measured_flop_rate(), 1000);
  EXPECT_EQ(matmul->bound_by(), "Compute");
  EXPECT_DOUBLE_EQ(matmul->gpu_tensorcore_utilization(), 1.0);
  EXPECT_DOUBLE_EQ(relu->measured_memory_bw(), 1000);  // 1 GiB in 1 ms
  EXPECT_EQ(relu->bound_by(), "Memory");
  EXPECT_EQ(orphan->op_type(), "unknown");
  EXPECT_EQ(result.warnings.device_events_without_op, 1u);
  EXPECT_DOUBLE_EQ(result.peak_flops_per_s, 100e12);
  EXPECT_EQ(result.device_self_ns, 2'000'500);
  EXPECT_EQ(result.db.device_type(), "GPU");

  // The terminal page (`podscope analyze RUN --tool op_stats`): the peaks, each row, and the warning.
  const std::string page = render_op_stats_page(result);
  EXPECT_NE(page.find("device peak 100.0 TFLOP/s, 1000.0 GB/s"), std::string::npos) << page;
  EXPECT_NE(page.find("MatMul"), std::string::npos) << page;
  EXPECT_NE(page.find("Compute"), std::string::npos) << page;
  EXPECT_NE(page.find("1 device events without an op stat"), std::string::npos) << page;
}

TEST(OpStatsTest, KernelsOfAProgramWithoutAFrameworkAreTheirOwnOpsWithoutAWarning) {
  GpuPlane gpu;
  gpu.kernel("saxpy", 1'000'000, 2'000, "");
  gpu.kernel("saxpy", 2'000'000, 2'000, "");
  gpu.kernel("reduce", 3'000'000, 1'000, "");
  const OpStatsResult result = xspace_to_op_stats(gpu.space);
  const TfStatsRecord* saxpy = find_record(result.db.without_idle(), "Device", "saxpy");
  ASSERT_NE(saxpy, nullptr);
  EXPECT_EQ(saxpy->occurrences(), 2u);
  EXPECT_EQ(result.warnings.device_events_with_op, 0u);
  const std::string page = render_op_stats_page(result);
  EXPECT_EQ(page.find("without an op stat"), std::string::npos) << page;
}

TEST(OpStatsTest, HostOpsAreTheTraceMesNamedAsTfOpsWithNestedOpsOffTheirSelfTime) {
  XSpace space;
  XPlane& host = add_plane(space, xspace::kHostPlaneName);
  xspace::XPlaneBuilder b(&host);
  auto thread = b.line(11, "tf_Compute/11");
  thread.add_event("ExecutorState::Process", kT0, 1000);
  thread.add_event("cond/then/Identity:Identity", kT0 + 100, 400);
  thread.add_event("n/_3:_HostRecv", kT0 + 200, 100);
  b.line(12, "tf_Compute/12").add_event("n/_3:_HostRecv", kT0 + 300, 300);

  const OpStatsResult result = xspace_to_op_stats(space);
  const TfStatsTable& table = result.db.without_idle();
  ASSERT_EQ(table.tf_stats_record_size(), 2);
  const TfStatsRecord* identity = find_record(table, "Host", "cond/then/Identity");
  const TfStatsRecord* recv = find_record(table, "Host", "n/_3");
  ASSERT_TRUE(identity && recv);
  EXPECT_EQ(recv->op_type(), "_HostRecv");
  EXPECT_DOUBLE_EQ(identity->total_self_time_in_us(), 0.3);
  EXPECT_DOUBLE_EQ(recv->total_self_time_in_us(), 0.4);
  EXPECT_EQ(recv->rank(), 1u);
  EXPECT_DOUBLE_EQ(recv->host_total_self_time_as_fraction(), 4.0 / 7);
  EXPECT_DOUBLE_EQ(identity->host_cumulative_total_self_time_as_fraction(), 1.0);
  EXPECT_EQ(recv->bound_by(), "unknown");
  EXPECT_EQ(result.host_self_ns, 700);
  ASSERT_EQ(result.planes.size(), 1u);
  EXPECT_EQ(result.planes[0].busy_ns, 500);  // 100..600 across both threads
  EXPECT_EQ(result.host_idle_ns, 0);
}

TEST(OpStatsTest, BadEventsAreCountedAndNeverChangeTheOtherTotals) {
  GpuPlane gpu;
  gpu.kernel("k", 0, 100, "good/Op:Add");
  gpu.kernel("k", 200, -50, "good/Op:Add");         // negative duration: left out
  gpu.kernel("k", 300, 100, "name_without_type:");  // malformed: counted under its text
  gpu.kernel("k", 400, 100, ":TypeWithoutName");
  gpu.kernel("k", 500, 100, "spaced/Op:Not An Identifier");
  XPlane& host = add_plane(gpu.space, xspace::kHostPlaneName);
  xspace::XPlaneBuilder b(&host);
  b.line(1, "t").add_event("x:Add", kT0, 10);
  b.line(1, "t").add_event("y:Add", kT0 + 5, 10);  // crosses its parent's end: only the overlap is nested

  const OpStatsResult result = xspace_to_op_stats(gpu.space);
  EXPECT_EQ(result.warnings.negative_durations, 1u);
  EXPECT_EQ(result.warnings.malformed_op_stats, 3u);
  EXPECT_EQ(result.device_self_ns, 400);
  const TfStatsRecord* good = find_record(result.db.without_idle(), "Device", "good/Op");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->occurrences(), 1);
  const TfStatsRecord* malformed = find_record(result.db.without_idle(), "Device", "name_without_type:");
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->op_type(), "unknown");
  EXPECT_EQ(result.host_self_ns, 15);
  for (const TfStatsRecord& r : result.db.with_idle().tf_stats_record()) EXPECT_GE(r.total_self_time_in_us(), 0);
}

TEST(OpStatsTest, KeepsTheLongestOpsPerSideAndCountsTheRestAsCut) {
  GpuPlane gpu;
  for (int i = 0; i < 5; ++i) gpu.kernel("k", i * 100, 10 * (i + 1), "op" + std::to_string(i) + ":Add");
  OpStatsBuilder builder;
  builder.add_plane(gpu.plane);
  const OpStatsResult result = std::move(builder).finish(2);
  const TfStatsTable& table = result.db.without_idle();
  ASSERT_EQ(table.tf_stats_record_size(), 2);
  EXPECT_EQ(table.tf_stats_record(0).op_name(), "op4");
  EXPECT_EQ(table.tf_stats_record(1).op_name(), "op3");
  EXPECT_EQ(result.db.device_records_cut(), 3u);
  // The fractions are of the side's whole time, cut ops included.
  EXPECT_DOUBLE_EQ(table.tf_stats_record(0).device_total_self_time_as_fraction(), 50.0 / 150);
}

TEST(OpStatsTest, TensorFlowFileOpSelfTimesSumToEachGpusStreamTime) {
  const auto tf_file = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!tf_file) return;
  std::map<std::string, testing::StreamTime> stream_time;
  OpStatsBuilder builder;
  const absl::Status status = xspace::read_xspace_planes(
      *tf_file,
      [&](const XPlane& plane) {
        if (plane.name().starts_with(xspace::kGpuPlanePrefix))
          stream_time[plane.name()] = testing::stream_time_of(plane);
        builder.add_plane(plane);
        return absl::OkStatus();
      },
      nullptr, OpStatsBuilder::wants_line);
  ASSERT_TRUE(status.ok()) << status;
  const OpStatsResult result = std::move(builder).finish(SIZE_MAX);
  EXPECT_EQ(result.warnings.negative_durations, 0u);
  EXPECT_EQ(result.warnings.malformed_op_stats, 0u);
  int64_t device_self = 0;
  for (const PlaneOpTime& plane : result.planes) {
    if (!plane.device) continue;
    const testing::StreamTime& streams = stream_time[plane.plane];
    // Kernels do not nest: each op's self time is its kernels' time, so the ops of a GPU sum to its streams'.
    EXPECT_EQ(plane.self_ns, streams.compute_ns + streams.other_ns) << plane.plane;
    EXPECT_LE(plane.busy_ns, plane.self_ns) << plane.plane;
    device_self += plane.self_ns;
  }
  EXPECT_GT(stream_time["/device:GPU:4"].compute_ns, 0);
  EXPECT_GT(stream_time["/device:GPU:6"].compute_ns, 0);
  EXPECT_EQ(result.device_self_ns, device_self);
  EXPECT_GT(result.peak_flops_per_s, 0);  // from the planes' clock rate, core count and compute capability

  // Every op is a row (no limit here): the rows' self times sum to the devices'.
  int64_t rows_self_ns = 0, typed_self_ns = 0;
  for (const TfStatsRecord& r : result.db.without_idle().tf_stats_record()) {
    EXPECT_GT(r.occurrences(), 0) << r.op_name();
    if (r.host_or_device() != "Device") continue;
    const auto self_ns = static_cast<int64_t>(r.total_self_time_in_us() * 1e3 + 0.5);
    rows_self_ns += self_ns;
    if (r.op_type() != "unknown") typed_self_ns += self_ns;
    EXPECT_EQ(r.op_name().find(':'), std::string::npos) << r.op_name();
  }
  EXPECT_NEAR(static_cast<double>(rows_self_ns), static_cast<double>(result.device_self_ns),
              static_cast<double>(result.db.without_idle().tf_stats_record_size()));
  // The kernels name their TF ops (`level 0`: name:Type); only copies TF annotated without a type are "unknown".
  EXPECT_GT(typed_self_ns, rows_self_ns * 9 / 10);
  // The host plane's executor TraceMes (`n/_3:_HostRecv`) are the host ops.
  EXPECT_GT(result.host_self_ns, 0);
  EXPECT_EQ(result.db.device_type(), "GPU");
}

}  // namespace
}  // namespace podscope::analysis
