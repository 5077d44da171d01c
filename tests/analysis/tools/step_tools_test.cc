// The overview page and the input pipeline analyzer on in-memory pods and on the real TF file: the input-bound
// verdict per host, "unknown, because ..." without steps, top ops, the recommendation, finite numbers.
#include <gtest/gtest.h>

#include "analysis/tools/input_pipeline.h"
#include "analysis/rendering/json_writer.h"
#include "analysis/tools/overview_page.h"
#include "analysis/tools/tool.h"
#include "analysis/rendering/renderers.h"
#include "analysis/steps/pod_steps.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/analysis/step_databases.h"
#include "tests/proto/xspace/xspace_contents.h"
#include "tests/shared_testdata.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::BottleneckAnalysis;
using tensorflow::profiler::GenericRecommendation;
using tensorflow::profiler::PerGenericStepDetails;
using tensorflow::profiler::XSpace;
using testing::step_databases;
using xspace::XPlaneBuilder;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'700'000'000'000'000'000;

// One host file with one annotated core: 5 steps of 10 ms; the core waits `infeed_ms` for input, computes, and
// waits in the all-reduce for the rest (a synchronous pod waits for its slowest input).
XSpace host_with_core(int core, int64_t infeed_ms) {
  XSpace space;
  XPlaneBuilder host(space.add_planes());
  host.proto()->set_name(std::string(xspace::kHostPlaneName));
  host.stats().add(xspace::kHostNameStat, "host" + std::to_string(core));
  XPlaneBuilder plane(space.add_planes());
  plane.proto()->set_name(std::string(xspace::kCustomPlanePrefix) + std::to_string(core));
  plane.proto()->set_id(core);
  auto steps = plane.line_named(xspace::kStepsLineName);
  auto ops = plane.line_named("ops");
  for (int i = 0; i < 5; ++i) {
    const int64_t s = kT0 + i * 10 * kMs;
    steps.add_event("step", s, 10 * kMs).add(xspace::kStepNumStat, int64_t{100 + i});
    ops.add_event("infeed", s, infeed_ms * kMs);
    ops.add_event("fusion", s + infeed_ms * kMs, 6 * kMs);
    ops.add_event("all-reduce", s + (infeed_ms + 6) * kMs, (4 - infeed_ms) * kMs);
  }
  return space;
}

TEST(InputPipelineTest, OneSlowInputHostIsHighlyInputBoundAndTheOthersAreNot) {
  std::vector<XSpace> spaces;
  for (int core = 0; core < 4; ++core) spaces.push_back(host_with_core(core, core == 2 ? 3 : 0));
  std::vector<const XSpace*> pointers;
  for (const auto& s : spaces) pointers.push_back(&s);
  const auto hosts = step_databases(pointers);
  const PodSteps model = merge_step_databases(hosts);
  const auto result = pod_steps_to_input_pipeline(model);

  ASSERT_EQ(result.hosts_size(), 4);
  EXPECT_EQ(result.hosts(0).host_name(), "host2");
  EXPECT_DOUBLE_EQ(result.hosts(0).input_percent(), 30.0);
  EXPECT_EQ(result.hosts(0).verdict(), "HIGHLY");
  for (int i = 1; i < 4; ++i) EXPECT_EQ(result.hosts(i).verdict(), "NOT") << result.hosts(i).host_name();
  // Each step is the pod's combined step: host2 waits for input while the others compute, so the pod's step has no
  // time every core spent waiting (compute outranks the wait, as in XProf); the range across cores, 0 .. 3 ms, and
  // the host ranking name host2.
  ASSERT_EQ(result.step_details_size(), 5);
  PerGenericStepDetails step;
  ASSERT_TRUE(result.step_details(0).UnpackTo(&step));
  EXPECT_EQ(result.step_details(0).type_url(), "type.googleapis.com/tensorflow.profiler.PerGenericStepDetails");
  EXPECT_EQ(step.step_number(), 100);
  EXPECT_DOUBLE_EQ(step.host_wait_input_ms(), 0.0);
  EXPECT_DOUBLE_EQ(step.min_core_wait_input_ms(), 0.0);
  EXPECT_DOUBLE_EQ(step.max_core_wait_input_ms(), 3.0);
  EXPECT_EQ(step.core_count(), 4u);
  EXPECT_DOUBLE_EQ(result.step_time_summary().average(), 10.0);
  EXPECT_DOUBLE_EQ(result.step_time_summary().standard_deviation(), 0.0);
  BottleneckAnalysis bottleneck;
  ASSERT_TRUE(result.recommendation().bottleneck_analysis().UnpackTo(&bottleneck));
  EXPECT_EQ(bottleneck.input_classification(), "NOT");
  const std::string text = render_input_pipeline_text(result);
  EXPECT_NE(text.find("Most input-bound host: host2"), std::string::npos) << text;
}

TEST(InputPipelineTest, VerdictThresholds) {
  EXPECT_EQ(input_bound_verdict(20, 0), "HIGHLY");
  EXPECT_EQ(input_bound_verdict(19.9, 0), "MODERATELY");
  EXPECT_EQ(input_bound_verdict(5, 0), "MODERATELY");
  EXPECT_EQ(input_bound_verdict(4.9, 3), "POTENTIALLY");
  EXPECT_EQ(input_bound_verdict(4.9, 2.9), "NOT");
  EXPECT_EQ(bottleneck_level(15), "high");
  EXPECT_EQ(bottleneck_level(3), "moderate");
  EXPECT_EQ(bottleneck_level(2.9), "no");
}

TEST(StepToolsTest, NoStepsGivesUnknownBecauseNamingTheStepSources) {
  XSpace space;
  XPlaneBuilder plane(space.add_planes());
  plane.proto()->set_name(std::string(xspace::kGpuPlanePrefix) + "0");
  plane.line_named("Stream #7(Compute)").add_event("volta_sgemm", kT0, kMs);
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  const auto input = pod_steps_to_input_pipeline(model);
  const auto page = pod_steps_to_overview_page(model, input);
  BottleneckAnalysis bottleneck;
  ASSERT_TRUE(input.recommendation().bottleneck_analysis().UnpackTo(&bottleneck));
  EXPECT_EQ(bottleneck.input_classification(), "unknown");
  EXPECT_TRUE(bottleneck.input_statement().starts_with("Input-bound: unknown, because no steps found: looked for"));
  EXPECT_NE(bottleneck.input_statement().find("group_id"), std::string::npos);
  EXPECT_EQ(page.recommendation().bottleneck(), "unknown");
  EXPECT_TRUE(page.analysis().remark_text().starts_with("Step time: unknown, because no steps found"));
  EXPECT_NE(render_overview_text(page).find("Step time: unknown, because"), std::string::npos);
  EXPECT_NE(render_input_pipeline_text(input).find("Input-bound: unknown, because"), std::string::npos);
  EXPECT_EQ(input.diagnostics().errors_size(), 1);
}

// A GPU step of 10 ms: kernel launches 0–2 ms while the GPU idles, a half-precision kernel 2–3 ms with 3 GFLOP, a
// 32-bit kernel 3–10 ms.
// A synchronous pod of two cores whose roles alternate (step 0: core 0 computes 8 ms and waits in the all-reduce
// for the rest of its step, core 1 computes 2 ms; step 1 swapped): every step is XProf's combined step, both cores'
// events swept together over the longest core's span (core 1, 10 ms, as XProf's step time): 8 ms of compute and
// 2 ms of all-reduce in both steps, as the pod did, with the spread of the cores' step times (9 and 10 ms) beside
// it. (The slowest core's step alone would alternate between 2 and 8 ms of compute.)
TEST(InputPipelineTest, APodsStepIsItsCoresSweptTogetherWithTheSpreadBeside) {
  std::vector<XSpace> spaces(2);
  for (int core = 0; core < 2; ++core) {
    XPlaneBuilder plane(spaces[core].add_planes());
    plane.proto()->set_name(std::string(xspace::kCustomPlanePrefix) + std::to_string(core));
    plane.proto()->set_id(core);
    auto steps = plane.line_named(xspace::kStepsLineName);
    auto ops = plane.line_named("ops");
    for (int i = 0; i < 2; ++i) {
      const int64_t s = kT0 + i * 10 * kMs;
      const int64_t compute_ms = (core + i) % 2 == 0 ? 8 : 2;
      const int64_t step_ms = core == 1 ? 10 : 9;
      steps.add_event("step", s, step_ms * kMs).add(xspace::kStepNumStat, int64_t{i});
      ops.add_event("fusion", s, compute_ms * kMs);
      ops.add_event("all-reduce", s + compute_ms * kMs, (step_ms - compute_ms) * kMs);
    }
  }
  const auto hosts = step_databases({&spaces[0], &spaces[1]});
  const PodSteps model = merge_step_databases(hosts);
  const auto result = pod_steps_to_input_pipeline(model);
  ASSERT_EQ(result.step_details_size(), 2);
  for (int i = 0; i < 2; ++i) {
    PerGenericStepDetails d;
    ASSERT_TRUE(result.step_details(i).UnpackTo(&d));
    EXPECT_EQ(d.step_number(), i);
    EXPECT_EQ(d.core_count(), 2u);
    EXPECT_DOUBLE_EQ(d.device_compute_ms(), 8.0) << "step " << i;
    EXPECT_DOUBLE_EQ(d.device_collectives_ms(), 2.0) << "step " << i;
    EXPECT_DOUBLE_EQ(d.unknown_time_ms(), 0.0) << "step " << i;
    EXPECT_DOUBLE_EQ(d.step_time_ms(), 10.0) << "the longest core's span";
    EXPECT_DOUBLE_EQ(d.min_core_step_time_ms(), 9.0);
    EXPECT_DOUBLE_EQ(d.max_core_step_time_ms(), 10.0);
    EXPECT_EQ(d.core_name(), "host1/device:CUSTOM:1") << "the longest core";
  }
  EXPECT_DOUBLE_EQ(result.step_time_summary().average(), 10.0);
  EXPECT_DOUBLE_EQ(result.step_time_summary().standard_deviation(), 0.0);
}

TEST(OverviewPageTest, TopOpsPrecisionAndKernelLaunchRecommendation) {
  XSpace space;
  XPlaneBuilder gpu(space.add_planes());
  gpu.proto()->set_name(std::string(xspace::kGpuPlanePrefix) + "0");
  gpu.line_named(xspace::kStepsLineName).add_event("1", kT0, 10 * kMs);
  auto stream = gpu.line_named("Stream #7(Compute)");
  stream.add_event("hgemm_half", kT0 + 2 * kMs, kMs).add(xspace::kFlopsStat, 3e9);
  stream.add_event("sgemm", kT0 + 3 * kMs, 7 * kMs);
  XPlaneBuilder cupti(space.add_planes());
  cupti.proto()->set_name(std::string(xspace::kCuptiHostPlaneName));
  cupti.line_named("api").add_event("cudaLaunchKernel", kT0, 2 * kMs);
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  auto page = pod_steps_to_overview_page(model, pod_steps_to_input_pipeline(model));

  const auto& a = page.analysis();
  ASSERT_EQ(a.top_device_ops_size(), 2);
  EXPECT_EQ(a.top_device_ops(0).name(), "sgemm");
  EXPECT_DOUBLE_EQ(a.top_device_ops(0).self_time_fraction(), 0.875);
  EXPECT_DOUBLE_EQ(a.top_device_ops(1).cumulative_time_fraction(), 1.0);
  EXPECT_DOUBLE_EQ(a.top_device_ops(1).flop_rate(), 3000.0);  // 3 GFLOP in 1 ms
  EXPECT_NEAR(a.device_compute_16bit_percent(), 12.5, 1e-9);
  EXPECT_NEAR(a.device_idle_time_percent(), 20.0, 1e-9);
  EXPECT_NEAR(a.host_idle_time_percent(), 80.0, 1e-9);
  GenericRecommendation generic;
  ASSERT_TRUE(page.recommendation().recommendation().UnpackTo(&generic));
  EXPECT_EQ(generic.kernel_launch_bottleneck(), "high");  // 20 %
  EXPECT_EQ(generic.all_other_bottleneck(), "no");
  EXPECT_EQ(page.recommendation().bottleneck(), "device");
  EXPECT_NE(page.recommendation().statement().find("NOT input-bound"), std::string::npos);
  show_ranked_advice(rank_advice(overview_advice(page)), page);
  EXPECT_EQ(page.recommendation().bottleneck(), "kernel launch");
  const std::string text = render_overview_recommendation_text(page);
  EXPECT_NE(text.find("1. high, 20.0 %: 20.0 % of the step time (2.000 ms per step) the device idles while the host "
                      "launches kernels"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("precision"), std::string::npos) << "12.5 % of the compute is 16-bit already: " << text;
  EXPECT_EQ(page.run_environment().device_type(), "GPU");
  EXPECT_EQ(page.run_environment().device_core_count(), 1);
}

// Without an accelerator nothing launches kernels and nothing computes in 16 bits: the same host work and 32-bit
// compute on an annotated core give neither piece of advice.
TEST(OverviewPageTest, NoKernelLaunchOrPrecisionAdviceWithoutAnAccelerator) {
  XSpace space;
  XPlaneBuilder core(space.add_planes());
  core.proto()->set_name(std::string(xspace::kCustomPlanePrefix) + "0");
  core.line_named(xspace::kStepsLineName).add_event("1", kT0, 10 * kMs);
  core.line_named("ops").add_event("sgemm", kT0 + 3 * kMs, 7 * kMs);
  XPlaneBuilder host(space.add_planes());
  host.proto()->set_name(std::string(xspace::kHostPlaneName));
  host.line_named("tf_Compute").add_event("ExecutorState::Process", kT0, 2 * kMs);
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  auto page = pod_steps_to_overview_page(model, pod_steps_to_input_pipeline(model));
  GenericRecommendation generic;
  ASSERT_TRUE(page.recommendation().recommendation().UnpackTo(&generic));
  EXPECT_EQ(generic.kernel_launch_statement(), "");
  EXPECT_EQ(generic.precision_statement(), "");
  for (const auto& advice : overview_advice(page)) {
    EXPECT_NE(advice.kind(), "kernel launch") << advice.statement();
    EXPECT_NE(advice.kind(), "precision") << advice.statement();
  }
  EXPECT_EQ(page.run_environment().device_type(), "CUSTOM");
}

TEST(StepToolsTest, RealTensorFlowFileGivesFiniteOverviewAndInputPipeline) {
  const auto path = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!path) return;
  const XSpace space = podscope::testing::read_xspace_file(*path);
  std::map<std::string, int64_t> steps_ps;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      if (line.name() == xspace::kStepsLineName && line.events_size() == 1) {
        steps_ps[plane.name()] = line.events(0).duration_ps();
      }
    }
  }
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  const auto input = pod_steps_to_input_pipeline(model);
  const auto page = pod_steps_to_overview_page(model, input);
  // One step, on GPU:4 and GPU:6, numbered by their group ids: shown as the pod's step, with both cores' times as
  // its spread.
  ASSERT_EQ(input.step_details_size(), 1);
  PerGenericStepDetails d;
  ASSERT_TRUE(input.step_details(0).UnpackTo(&d));
  const double gpu4_ms = static_cast<double>(steps_ps.at("/device:GPU:4") / 1000) / 1e6;
  const double gpu6_ms = static_cast<double>(steps_ps.at("/device:GPU:6") / 1000) / 1e6;
  EXPECT_EQ(d.core_count(), 2u);
  EXPECT_NEAR(d.step_time_ms(), std::max(gpu4_ms, gpu6_ms), 1e-6);
  EXPECT_DOUBLE_EQ(d.min_core_step_time_ms(), std::min(gpu4_ms, gpu6_ms));
  EXPECT_DOUBLE_EQ(d.max_core_step_time_ms(), std::max(gpu4_ms, gpu6_ms));
  for (const PodCore& core : model.cores) {
    const std::string& plane = core.core->plane_name();
    if (plane == "/device:GPU:4" || plane == "/device:GPU:6") {
      ASSERT_EQ(core.steps.size(), 1u) << plane;
      EXPECT_EQ(core.steps[0]->end_ns() - core.steps[0]->start_ns(), steps_ps.at(plane) / 1000);
    }
  }
  EXPECT_GT(input.input_op_details_size(), 0);
  EXPECT_EQ(page.run_environment().device_type(), "GPU");
  for (const auto* message :
       {static_cast<const google::protobuf::Message*>(&input), static_cast<const google::protobuf::Message*>(&page)}) {
    const auto json = message_to_json(*message, false);
    ASSERT_TRUE(json.ok());
    EXPECT_EQ(json->find("NaN"), std::string::npos);
    EXPECT_EQ(json->find("Infinity"), std::string::npos);
  }
  EXPECT_FALSE(render_overview_text(page).empty());
  EXPECT_FALSE(render_input_pipeline_text(input).empty());
}

// XProf's precision rule on kernels as TensorFlow writes them (kernel_details, a launch-parameter string, says
// nothing about precision): the `shape` stat (its tensor shapes) decides when present, else the kernel's name.
TEST(OverviewPageTest, SixteenBitComputeFromTensorShapesElseKernelName) {
  XSpace space;
  XPlaneBuilder gpu(space.add_planes());
  gpu.proto()->set_name(std::string(xspace::kGpuPlanePrefix) + "0");
  gpu.line_named(xspace::kStepsLineName).add_event("1", kT0, 10 * kMs);
  auto stream = gpu.line_named("Stream #7(Compute)");
  stream.add_event("volta_fp16_s884gemm_fp16_128x128_nn", kT0, 2 * kMs)
      .add("kernel_details",
           std::string_view("regs:128 static_shared:0 dynamic_shared:49152 grid:64,8,1 block:256,1,1"));
  stream.add_event("volta_fp16_s884gemm_fp16_64x64_nn", kT0 + 2 * kMs, 3 * kMs)
      .add("shape", std::string_view("(float[4,384];float[])"));
  stream.add_event("fused_add", kT0 + 5 * kMs, 5 * kMs).add("shape", std::string_view("(half[4,384,4096])"));
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  const auto page = pod_steps_to_overview_page(model, pod_steps_to_input_pipeline(model));
  EXPECT_NEAR(page.analysis().device_compute_16bit_percent(), 70.0, 1e-9);
  EXPECT_NEAR(page.analysis().device_compute_32bit_percent(), 30.0, 1e-9);
}

TEST(OverviewPageTest, RunEnvironmentShowsTheAnnotatedBatchSize) {
  XSpace space;
  XPlaneBuilder core(space.add_planes());
  core.proto()->set_name(std::string(xspace::kCustomPlanePrefix) + "0");
  auto steps = core.line_named(xspace::kStepsLineName);
  auto ops = core.line_named("Ops");
  for (int64_t i = 0; i < 3; ++i) {
    steps.add_event("step", kT0 + i * 10 * kMs, 10 * kMs)
        .add(xspace::kStepNumStat, i)
        .add(xspace::kBatchSizeStat, int64_t{64});
    ops.add_event("matmul", kT0 + i * 10 * kMs, 8 * kMs);
  }
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  const auto page = pod_steps_to_overview_page(model, pod_steps_to_input_pipeline(model));
  EXPECT_EQ(page.run_environment().batch_size_per_core(), 64);
  EXPECT_NE(render_overview_text(page).find("batch size 64 per core"), std::string::npos) << render_overview_text(page);
}

TEST(OverviewPageTest, RunEnvironmentWithoutAnnotatedBatchSizeSaysNothingOfIt) {
  XSpace space;
  XPlaneBuilder core(space.add_planes());
  core.proto()->set_name(std::string(xspace::kCustomPlanePrefix) + "0");
  core.line_named(xspace::kStepsLineName).add_event("step", kT0, 10 * kMs).add(xspace::kStepNumStat, int64_t{1});
  core.line_named("Ops").add_event("matmul", kT0, 8 * kMs);
  const auto hosts = step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  const auto page = pod_steps_to_overview_page(model, pod_steps_to_input_pipeline(model));
  EXPECT_EQ(page.run_environment().batch_size_per_core(), 0);
  EXPECT_EQ(render_overview_text(page).find("batch size"), std::string::npos);
}

}  // namespace
}  // namespace podscope::analysis
