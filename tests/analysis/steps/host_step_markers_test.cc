// Steps from TF's host step markers: a GPU plane without a Steps line and without group ids, beside a
// /host:CPU plane whose `train` markers carry step_num, gets one step per marker, numbered by it, with
// the device ops that the marker's step launched (the device runs behind the host).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "analysis/runner/analysis_runner.h"
#include "analysis/pod/step_category.h"
#include "analysis/steps/step_spans.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/analysis/step_databases.h"
#include "tests/scratch_directory.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::XSpace;
using xspace::XPlaneBuilder;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'700'000'000'000'000'000;  // Unix ns
constexpr int64_t kFirstStep = 7;
constexpr int kSteps = 3;
constexpr int64_t kDeviceLag = 3 * kMs;  // device ops start this long after their host step

// Host: `train` markers [T0 + 10 ms·i, +10 ms) with step_num 7, 8, 9, each holding a nested
// `TraceContext` without a number (dropped as nested). Device: per step, 3 ms after its marker began, a
// host-to-device copy (1 ms), 1 ms idle, a fusion (4 ms, high flops), a multiply (2 ms, low flops): an 8 ms
// step whose last one ends after its marker. One op before the first marker belongs to no step.
void add_host_plane(XSpace& space) {
  XPlaneBuilder host(space.add_planes());
  host.proto()->set_name(std::string(xspace::kHostPlaneName));
  auto python = host.line_named("python3");
  auto executor = host.line_named("tf_executor");
  for (int i = 0; i < kSteps; ++i) {
    const int64_t start = kT0 + i * 10 * kMs;
    python.add_event("train", start, 10 * kMs).add(xspace::kStepNumStat, kFirstStep + i);
    executor.add_event("TraceContext", start + kMs, 5 * kMs);
  }
}

void add_gpu_plane(XSpace& space) {
  XPlaneBuilder gpu(space.add_planes());
  gpu.proto()->set_name(std::string(xspace::kGpuPlanePrefix) + "0");
  gpu.proto()->set_id(0);
  auto stream = gpu.line_named("Stream #7(Compute)");
  stream.add_event("warmup_kernel", kT0 - 2 * kMs, kMs);
  for (int i = 0; i < kSteps; ++i) {
    const int64_t s = kT0 + i * 10 * kMs + kDeviceLag;
    stream.add_event("MemcpyH2D", s, kMs);
    stream.add_event("fusion.3", s + 2 * kMs, 4 * kMs);
    stream.add_event("multiply", s + 6 * kMs, 2 * kMs);
  }
}

using testing::pod_analysis;
using testing::read_host_step_markers;

double us(const podscope::v1::PodStatsRecord& r, StepCategory c) {
  const auto it = r.step_breakdown_us().find(static_cast<int>(c));
  return it == r.step_breakdown_us().end() ? -1.0 : it->second;
}

void expect_one_step_per_marker(const podscope::v1::PodAnalysis& analysis) {
  EXPECT_EQ(analysis.counts().planes_without_steps(), 0u);
  const auto& seq = analysis.pod_viewer().pod_stats_sequence();
  ASSERT_EQ(seq.pod_stats_map_size(), kSteps);
  for (int i = 0; i < kSteps; ++i) {
    const auto& step = seq.pod_stats_map(i);
    EXPECT_EQ(step.step_num(), static_cast<uint32_t>(kFirstStep + i));
    ASSERT_EQ(step.pod_stats_per_core_size(), 1);
    const auto& r = step.pod_stats_per_core().begin()->second;
    EXPECT_EQ(r.step_num(), static_cast<uint32_t>(kFirstStep + i));
    EXPECT_DOUBLE_EQ(r.total_duration_us(), 8'000);
    double sum = 0;
    for (const auto& [id, v] : r.step_breakdown_us()) sum += v;
    EXPECT_NEAR(sum, r.total_duration_us(), 1e-6) << "step " << step.step_num();
    EXPECT_DOUBLE_EQ(us(r, StepCategory::kHostToDevice), 1'000);
    EXPECT_DOUBLE_EQ(us(r, StepCategory::kIdle), 1'000);
    EXPECT_DOUBLE_EQ(us(r, StepCategory::kHighFlopsCompute), 4'000);
    EXPECT_DOUBLE_EQ(us(r, StepCategory::kLowFlopsCompute), 2'000);
  }
}

TEST(PodAnalyzerHostMarkersTest, HostPlaneAfterTheDevicePlaneGivesOneStepPerTrainMarker) {
  XSpace space;
  add_gpu_plane(space);
  add_host_plane(space);
  expect_one_step_per_marker(pod_analysis({&space}));
}

TEST(PodAnalyzerHostMarkersTest, HostPlaneBeforeTheDevicePlaneGivesTheSameSteps) {
  XSpace space;
  add_host_plane(space);
  add_gpu_plane(space);
  expect_one_step_per_marker(pod_analysis({&space}));
}

// The runner reads files a plane at a time and leaves unwanted lines out: the host plane's lines must
// come through.
TEST(PodAnalyzerHostMarkersTest, RunDirectoryReadsTheMarkersFromTheFile) {
  namespace fs = std::filesystem;
  const podscope::testing::ScratchDirectory scratch("host_markers");
  const std::filesystem::path& dir = scratch.path();
  XSpace space;
  add_gpu_plane(space);
  add_host_plane(space);
  {
    std::ofstream out(dir / "host0.xplane.pb", std::ios::binary);
    ASSERT_TRUE(space.SerializeToOstream(&out));
  }
  auto outcome = analyze_run_directory(dir);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  expect_one_step_per_marker(outcome->analysis);
}

// A device plane with steps of its own shows TF grouped the file's events (host markers included): a
// plane of the same file without steps had no step work and stays without steps.
TEST(PodAnalyzerHostMarkersTest, FileWithStepsOnAnotherDevicePlaneKeepsTheMarkersOut) {
  XSpace space;
  add_gpu_plane(space);
  XPlaneBuilder stepped(space.add_planes());
  stepped.proto()->set_name(std::string(xspace::kGpuPlanePrefix) + "1");
  stepped.proto()->set_id(1);
  stepped.line_named(xspace::kStepsLineName).add_event("100", kT0, 30 * kMs);
  stepped.line_named("Stream #8(Compute)").add_event("fusion.1", kT0 + kMs, 5 * kMs);
  add_host_plane(space);
  const auto analysis = pod_analysis({&space});
  EXPECT_EQ(analysis.counts().planes_without_steps(), 1u);
  const auto& seq = analysis.pod_viewer().pod_stats_sequence();
  ASSERT_EQ(seq.pod_stats_map_size(), 1);
  EXPECT_EQ(seq.pod_stats_map(0).step_num(), 100u);
}

TEST(PodAnalyzerHostMarkersTest, MarkersInOtherFilesAreNotUsed) {
  XSpace device_only;
  add_gpu_plane(device_only);
  XSpace host_only;
  add_host_plane(host_only);
  const auto analysis = pod_analysis({&device_only, &host_only});
  // The device plane stays without steps; the host-only file is a program without devices, its host its own core
  // with its markers' steps.
  EXPECT_EQ(analysis.counts().planes_without_steps(), 1u);
  ASSERT_EQ(analysis.cores_size(), 1);
  EXPECT_EQ(analysis.cores(0).plane_name(), xspace::kHostPlaneName);
  EXPECT_EQ(analysis.cores(0).core_id(), 1000u);
}

TEST(PodAnalyzerHostMarkersTest, MarkerNumbersFallBackToIterNumThenOrder) {
  tensorflow::profiler::XPlane plane;
  XPlaneBuilder host(&plane);
  plane.set_name(std::string(xspace::kHostPlaneName));
  auto line = host.line_named("python3");
  line.add_event("test", kT0, 10 * kMs).add(xspace::kIterNumStat, int64_t{4});
  line.add_event("TraceContext", kT0 + 10 * kMs, 10 * kMs);
  line.add_event("train_step", kT0 + 20 * kMs, 10 * kMs).add(xspace::kStepNumStat, int64_t{40});
  line.add_event("optimizer", kT0 + 30 * kMs, 10 * kMs).add(xspace::kStepNumStat, int64_t{41});  // not a marker
  const HostStepMarkers found = read_host_step_markers(plane);
  EXPECT_EQ(found.source, StepSource::kHostMarkers);
  const auto& markers = found.markers;
  ASSERT_EQ(markers.size(), 3u);
  EXPECT_EQ(markers[0].step_num, 4);
  EXPECT_EQ(markers[1].step_num, 5);
  EXPECT_EQ(markers[1].start_ns, kT0 + 10 * kMs);
  EXPECT_EQ(markers[2].step_num, 40);
  EXPECT_EQ(markers[2].end_ns, kT0 + 30 * kMs);
}

// Keras 3's model.fit on TensorFlow 2.21 writes no `train` marker: each step is one call of its tf.function
// `multi_step_on_iterator`, numbered in order.
TEST(PodAnalyzerHostMarkersTest, KerasFitStepFunctionCallsAreMarkers) {
  tensorflow::profiler::XPlane plane;
  XPlaneBuilder host(&plane);
  plane.set_name(std::string(xspace::kHostPlaneName));
  auto line = host.line_named("python");
  for (int i = 0; i < 3; ++i) line.add_event("multi_step_on_iterator", kT0 + i * 10 * kMs, 9 * kMs);
  const auto markers = read_host_step_markers(plane).markers;
  ASSERT_EQ(markers.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(markers[i].step_num, i);
    EXPECT_EQ(markers[i].start_ns, kT0 + i * 10 * kMs);
  }
}

// A custom loop's `train` Trace (numbered) around a tf.function `train_step`: the capture began inside a step, so
// its `train_step` call is there without the `train` around it; it is no step of its own.
TEST(PodAnalyzerHostMarkersTest, AnUnnumberedMarkerBeforeTheFirstNumberedOneIsNoStep) {
  tensorflow::profiler::XPlane plane;
  XPlaneBuilder host(&plane);
  plane.set_name(std::string(xspace::kHostPlaneName));
  auto line = host.line_named("python");
  line.add_event("train_step", kT0, 3 * kMs);
  for (int i = 0; i < 2; ++i) {
    const int64_t s = kT0 + (5 + i * 10) * kMs;
    line.add_event("train", s, 10 * kMs).add(xspace::kStepNumStat, int64_t{126 + i});
    line.add_event("train_step", s + kMs, 3 * kMs);
  }
  const auto markers = read_host_step_markers(plane).markers;
  ASSERT_EQ(markers.size(), 2u);
  EXPECT_EQ(markers[0].step_num, 126);
  EXPECT_EQ(markers[0].start_ns, kT0 + 5 * kMs);
  EXPECT_EQ(markers[1].step_num, 127);
}

}  // namespace
}  // namespace podscope::analysis
