// The step database: per step and core, time by event type with XProf's priorities, the program's step numbers,
// host activity filling the device's idle time, dropped steps counted by reason (the host's and the pod's share of
// the keep rule), a host's database written and read back, and the real TF file.
#include "analysis/steps/step_database.h"

#include <gtest/gtest.h>

#include <cmath>

#include "analysis/steps/pod_steps.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/analysis/step_databases.h"
#include "tests/proto/xspace/xspace_contents.h"
#include "tests/shared_testdata.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::XSpace;
using xspace::XPlaneBuilder;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'700'000'000'000'000'000;

using podscope::v1::CoreStep;
using testing::step_databases;

int64_t type_ms(const CoreStep& step, EventType type) { return step.type_ns(static_cast<int>(type)) / kMs; }
int64_t duration_ns(const CoreStep& step) { return step.end_ns() - step.start_ns(); }

XPlaneBuilder custom_plane(XSpace& space, int core) {
  XPlaneBuilder plane(space.add_planes());
  plane.proto()->set_name(std::string(xspace::kCustomPlanePrefix) + std::to_string(core));
  plane.proto()->set_id(core);
  return plane;
}

// Steps 20, 21, 22 of 10 ms each: infeed 0–3 ms, compute 3–8 ms, an all-reduce 7–9 ms (overlapping compute by
// 1 ms), idle 9–10 ms.
XSpace annotated_core(int core = 0, int first_step = 20, int steps = 3) {
  XSpace space;
  XPlaneBuilder plane = custom_plane(space, core);
  auto step_line = plane.line_named(xspace::kStepsLineName);
  auto ops = plane.line_named("ops");
  auto collectives = plane.line_named("collectives");
  for (int i = 0; i < steps; ++i) {
    const int64_t s = kT0 + i * 10 * kMs;
    step_line.add_event("step", s, 10 * kMs).add(xspace::kStepNumStat, int64_t{first_step + i});
    ops.add_event("infeed", s, 3 * kMs);
    ops.add_event("matmul", s + 3 * kMs, 5 * kMs);
    collectives.add_event("all-reduce", s + 7 * kMs, 2 * kMs);
  }
  return space;
}

TEST(StepDatabaseTest, KeepsTheProgramsStepNumbersAndBreaksStepsDownByPriority) {
  const XSpace space = annotated_core();
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  ASSERT_EQ(model.cores.size(), 1u);
  const auto& steps = model.cores[0].steps;
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0]->step_num(), 20);
  EXPECT_EQ(steps[2]->step_num(), 22);
  EXPECT_EQ(model.cores[0].core->source(), podscope::v1::STEP_SOURCE_STEPS_LINE);
  for (const CoreStep* s : steps) {
    const CoreStep& step = *s;
    EXPECT_EQ(type_ms(step, EventType::kHostWaitInput), 3);
    EXPECT_EQ(type_ms(step, EventType::kDeviceCompute32), 5);  // compute (140) wins its overlap with the all-reduce
    EXPECT_EQ(type_ms(step, EventType::kDeviceCollectives), 1);
    EXPECT_EQ(type_ms(step, EventType::kUnknown), 1);
    int64_t total = 0;
    for (int64_t ns : step.type_ns()) total += ns;
    EXPECT_EQ(total, duration_ns(step));
  }
  EXPECT_TRUE(model.dropped_steps.empty());
}

// A host's database is a message: written and read back, it merges into the same pod's steps, byte for byte.
TEST(StepDatabaseTest, AHostsDatabaseReadBackIsTheSameDatabase) {
  const XSpace space = annotated_core();
  const auto hosts = step_databases({&space});
  std::string bytes;
  ASSERT_TRUE(hosts[0].SerializeToString(&bytes));
  std::vector<podscope::v1::HostStepDatabase> read_back(1);
  ASSERT_TRUE(read_back[0].ParseFromString(bytes));
  EXPECT_EQ(read_back[0].SerializeAsString(), bytes);
  const PodSteps pod = merge_step_databases(read_back);
  ASSERT_EQ(pod.steps.size(), 3u);
  EXPECT_EQ(pod.steps[0].duration_ns, 10 * kMs);
}

TEST(StepDatabaseTest, WaitForInputWinsOverCollectivesAndLosesToCompute) {
  std::vector<TypedInterval> events = {
      {0, 10, EventType::kDeviceCollectives}, {2, 6, EventType::kHostWaitInput}, {4, 5, EventType::kDeviceCompute16}};
  std::vector<int64_t> busy;
  std::vector<TimeSpan> gaps;
  const auto d = break_down_by_type(events, {{0, 12}}, &busy, &gaps);
  EXPECT_EQ(at(d[0], EventType::kDeviceCollectives), 6);
  EXPECT_EQ(at(d[0], EventType::kHostWaitInput), 3);
  EXPECT_EQ(at(d[0], EventType::kDeviceCompute16), 1);
  EXPECT_EQ(at(d[0], EventType::kUnknown), 2);
  EXPECT_EQ(busy[0], 10);
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_EQ(gaps[0].start_ns, 10);
  EXPECT_EQ(gaps[0].end_ns, 12);
}

// A GPU plane with a Steps line beside /host:CPU and /host:CUPTI: IteratorGetNext while the GPU idles is waiting
// for input, a launch API call is kernel launch, host events under device work do not count.
TEST(StepDatabaseTest, HostWaitAndLaunchCountInTheDevicesGaps) {
  XSpace space;
  XPlaneBuilder gpu(space.add_planes());
  gpu.proto()->set_name(std::string(xspace::kGpuPlanePrefix) + "0");
  auto steps_line = gpu.line_named(xspace::kStepsLineName);
  steps_line.add_event("5", kT0, 10 * kMs);
  auto stream = gpu.line_named("Stream #7(Compute)");
  stream.add_event("volta_sgemm_half_nn", kT0 + 4 * kMs, 6 * kMs);
  XPlaneBuilder host(space.add_planes());
  host.proto()->set_name(std::string(xspace::kHostPlaneName));
  host.line_named("tf_data").add_event("IteratorGetNextOp::DoCompute", kT0 - kMs, 3 * kMs);
  host.line_named("executor").add_event("ExecutorState::Process", kT0 + 5 * kMs, 2 * kMs);
  XPlaneBuilder cupti(space.add_planes());
  cupti.proto()->set_name(std::string(xspace::kCuptiHostPlaneName));
  cupti.line_named("api").add_event("cudaLaunchKernel", kT0 + 3 * kMs, kMs);

  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  const CoreStep& step = *model.cores[0].steps.at(0);
  EXPECT_EQ(step.step_num(), 5);
  EXPECT_EQ(type_ms(step, EventType::kHostWaitInput), 2);
  EXPECT_EQ(type_ms(step, EventType::kHostPrepare), 1);
  EXPECT_EQ(type_ms(step, EventType::kDeviceCompute16), 6);  // "half" in the kernel's name
  EXPECT_EQ(type_ms(step, EventType::kUnknown), 1);
  EXPECT_EQ(step.host_busy_ns(), 5 * kMs);
}

TEST(StepDatabaseTest, CountsDroppedStepsByReason) {
  XSpace a = annotated_core(0, 20, 4);
  XSpace b = annotated_core(1, 21, 3);  // lacks step 20
  // A capture window that cuts a's last step.
  XPlaneBuilder host(a.add_planes());
  host.proto()->set_name(std::string(xspace::kHostPlaneName));
  host.stats().add(xspace::kCaptureStartStat, kT0 - kMs).add(xspace::kCaptureEndStat, kT0 + 35 * kMs);
  const auto hosts = step_databases({&a, &b});
  const PodSteps model = merge_step_databases(hosts);
  EXPECT_EQ(model.dropped_steps.at("partial: cut by the capture window's edge"), 1u);
  EXPECT_EQ(model.dropped_steps.at("missing on some core"), 2u);  // a's 20, b's 23
  ASSERT_EQ(model.cores.size(), 2u);
  for (const PodCore& core : model.cores) {
    ASSERT_EQ(core.steps.size(), 2u);
    EXPECT_EQ(core.steps[0]->step_num(), 21);
    EXPECT_EQ(core.steps[1]->step_num(), 22);
  }
}

TEST(StepDatabaseTest, NoStepsNamesTheSourcesLookedFor) {
  XSpace space;
  XPlaneBuilder plane = custom_plane(space, 0);
  plane.line_named("ops").add_event("matmul", kT0, kMs);
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  EXPECT_FALSE(model.has_steps());
  EXPECT_EQ(model.planes_without_steps, 1u);
  const std::string why = no_steps_explanation();
  EXPECT_NE(why.find("Steps"), std::string::npos);
  EXPECT_NE(why.find("group_id"), std::string::npos);
  EXPECT_NE(why.find("tf.profiler.experimental.Trace(\"train\", step_num=step, _r=1)"), std::string::npos);
}

// A loader's stages: batch (enqueue, root) holding read (4 ms) and decode (2 ms); the root waits for input.
TEST(StepDatabaseTest, InputStagesGiveSelfTimeByTheirParentLinks) {
  XSpace space = annotated_core(0, 20, 1);
  XPlaneBuilder plane(space.mutable_planes(0));
  auto input = plane.line_named(xspace::kInputPipelineLineName);
  auto stage = [&](std::string_view name, std::string_view category, int64_t id, int64_t parent, int64_t start,
                   int64_t duration) {
    input.add_event(name, start, duration)
        .add(xspace::kInputStageCategoryStat, category)
        .add(xspace::kInputStageIdStat, id)
        .add(xspace::kInputStageParentIdStat, parent);
  };
  stage("batch", "enqueue", 1, 0, kT0 + 8 * kMs, 7 * kMs);  // 8–15 ms: 8–10 ms of it in step 20
  stage("read", "read", 2, 1, kT0 + 8 * kMs, 4 * kMs);
  stage("decode", "preprocess", 3, 1, kT0 + 12 * kMs, 2 * kMs);
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  const auto& stages = model.cores[0].core->input_stages();
  ASSERT_EQ(stages.size(), 3);
  auto find = [&](std::string_view name) {
    return *std::find_if(stages.begin(), stages.end(),
                         [&](const podscope::v1::InputOp& s) { return s.name() == name; });
  };
  auto category = [](const podscope::v1::InputOp& s) { return static_cast<InputCategory>(s.category()); };
  EXPECT_EQ(find("batch").self_ns(), kMs);
  EXPECT_EQ(category(find("batch")), InputCategory::kEnqueue);
  EXPECT_EQ(find("read").self_ns(), 4 * kMs);
  EXPECT_EQ(category(find("read")), InputCategory::kDemandedFileRead);
  EXPECT_EQ(category(find("decode")), InputCategory::kPreprocessing);
  // The root stage waits for input from 8 to 10 ms (over the all-reduce, which has the lower priority) on top of
  // the infeed's 3 ms.
  EXPECT_EQ(type_ms(*model.cores[0].steps[0], EventType::kHostWaitInput), 3 + 2);
  EXPECT_EQ(type_ms(*model.cores[0].steps[0], EventType::kDeviceCollectives), 0);
}

TEST(StepDatabaseTest, ClassifiesTfDataOpsByXProfsRules) {
  EXPECT_EQ(host_input_category("Iterator::Prefetch::TFRecord"), InputCategory::kAdvancedFileRead);
  EXPECT_EQ(host_input_category("Iterator::Map::TFRecord"), InputCategory::kDemandedFileRead);
  EXPECT_EQ(host_input_category("Iterator::Prefetch::Map"), InputCategory::kPreprocessing);
  EXPECT_EQ(host_input_category("InfeedEnqueueTuple"), InputCategory::kEnqueue);
  EXPECT_EQ(host_input_category("MemcpyH2D"), InputCategory::kEnqueue);
  EXPECT_EQ(host_input_category("IteratorGetNextOp::DoCompute"), InputCategory::kUnclassified);
  EXPECT_EQ(host_input_category("MatMul"), std::nullopt);
}

TEST(StepDatabaseTest, RealTensorFlowFileGivesGpu4AndGpu6TheirStepsEventTimes) {
  const auto path = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!path) return;
  const XSpace space = podscope::testing::read_xspace_file(*path);
  // The Steps events' durations of GPU:4 and GPU:6, read straight from the file.
  std::map<std::string, std::vector<int64_t>> steps_ps;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      if (line.name() != xspace::kStepsLineName) continue;
      for (const auto& e : line.events()) steps_ps[plane.name()].push_back(e.duration_ps());
    }
  }
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  int checked = 0;
  for (const PodCore& core : model.cores) {
    for (const CoreStep* step : core.steps) {
      for (int64_t ns : step->type_ns()) EXPECT_GE(ns, 0) << core.name;
      EXPECT_GT(duration_ns(*step), 0);
    }
    const std::string& plane = core.core->plane_name();
    if (plane != "/device:GPU:4" && plane != "/device:GPU:6") continue;
    const auto& expected = steps_ps.at(plane);
    ASSERT_EQ(core.steps.size(), expected.size()) << plane;
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(duration_ns(*core.steps[i]), expected[i] / 1000) << plane;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// TensorFlow or JAX on CPU: a file of one /host:CPU plane, no device plane. Its step markers make one core, the
// host's, and the host's events explain each step: IteratorGetNext waits for input, the step function's work is
// host compute, time no event covers all others; its steps need no device work.
TEST(StepDatabaseTest, AHostOnlyFileIsOneCoreStepByItsMarkers) {
  XSpace space;
  XPlaneBuilder host(space.add_planes());
  host.proto()->set_name(std::string(xspace::kHostPlaneName));
  auto python = host.line_named("python");
  auto data = host.line_named("tf_data_iterator_get_next");
  for (int i = 0; i < 3; ++i) {
    const int64_t s = kT0 + i * 10 * kMs;
    python.add_event("train", s, 10 * kMs).add(xspace::kStepNumStat, int64_t{7 + i});
    data.add_event("IteratorGetNextOp::DoCompute", s, 4 * kMs);
    python.add_event("EagerExecute", s + 4 * kMs, 5 * kMs);
  }
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  ASSERT_EQ(model.cores.size(), 1u);
  EXPECT_EQ(model.cores[0].core->plane_name(), xspace::kHostPlaneName);
  EXPECT_EQ(model.cores[0].core->source(), podscope::v1::STEP_SOURCE_HOST_MARKERS);
  EXPECT_EQ(model.device_planes, 0u);
  const auto& steps = model.cores[0].steps;
  ASSERT_EQ(steps.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(steps[i]->step_num(), 7 + i);
    EXPECT_EQ(duration_ns(*steps[i]), 10 * kMs);
    EXPECT_EQ(type_ms(*steps[i], EventType::kHostWaitInput), 4);
    EXPECT_EQ(type_ms(*steps[i], EventType::kHostCompute), 5);
    EXPECT_EQ(type_ms(*steps[i], EventType::kUnknown), 1);
  }
}

}  // namespace
}  // namespace podscope::analysis
