// The one step database: the pod viewer, the step tools (the pod's steps) and the trace window's reader
// (FileStepSpans) read the same steps of the same cores with the same durations, on the real TensorFlow file, the
// synthetic pod, a real capture of a ring all-reduce pod and a real CUDA program's capture whose steps are NVTX
// ranges.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "analysis/steps/event_type.h"
#include "analysis/pod/pod_analyzer.h"
#include "analysis/tools/input_pipeline.h"
#include "analysis/tools/kernel_stats.h"
#include "analysis/tools/memory_profile.h"
#include "analysis/tools/op_stats.h"
#include "analysis/tools/overview_page.h"
#include "analysis/tools/tf_data_stats.h"
#include "analysis/runner/analysis_runner.h"
#include "analysis/pod/step_category.h"
#include "analysis/steps/step_database.h"
#include "analysis/steps/step_spans.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/analysis/step_databases.h"
#include "tests/analysis/synthetic_pod.h"
#include "tests/proto/xspace/xspace_contents.h"
#include "tests/scratch_directory.h"
#include "tests/shared_testdata.h"

namespace podscope::analysis {
namespace {

namespace fs = std::filesystem;
using tensorflow::profiler::XSpace;
using testing::read_host_step_markers;

// (host/plane, step number) → duration in ns.
using CoreStepDurations = std::map<std::pair<std::string, int64_t>, int64_t>;

const fs::path kNvtxRun = fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/analysis/cuda_nvtx_steps";

std::vector<const XSpace*> pointers(const std::vector<XSpace>& spaces) {
  std::vector<const XSpace*> out;
  for (const XSpace& s : spaces) out.push_back(&s);
  return out;
}

// The pod viewer's records (the steps it shows): their durations, or the time of one category.
CoreStepDurations pod_viewer_steps(const podscope::v1::PodAnalysis& analysis,
                                   std::optional<StepCategory> category = std::nullopt) {
  std::map<uint32_t, std::string> plane_of;
  for (const auto& core : analysis.cores()) plane_of[core.core_id()] = core.host_name() + core.plane_name();
  CoreStepDurations steps;
  for (const auto& map : analysis.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    for (const auto& [core_id, record] : map.pod_stats_per_core()) {
      const auto part =
          category ? record.step_breakdown_us().find(static_cast<int>(*category)) : record.step_breakdown_us().end();
      const double us =
          !category ? record.total_duration_us() : (part == record.step_breakdown_us().end() ? -1 : part->second);
      steps[{plane_of.at(core_id), map.step_num()}] = std::llround(us * 1e3);
    }
  }
  return steps;
}

// The step tools' steps (each core's, as the pod keeps them): their durations, or the time of one event type.
CoreStepDurations step_tool_steps(const PodSteps& pod, std::optional<EventType> type = std::nullopt) {
  CoreStepDurations steps;
  for (const PodCore& core : pod.cores) {
    for (const podscope::v1::CoreStep* s : core.steps) {
      steps[{core.name, s->step_num()}] = type ? s->type_ns(static_cast<int>(*type)) : s->end_ns() - s->start_ns();
    }
  }
  return steps;
}

CoreStepDurations trace_window_steps(const std::vector<XSpace>& spaces) {
  CoreStepDurations steps;
  for (size_t i = 0; i < spaces.size(); ++i) {
    FileStepSpans reader;
    for (const auto& plane : spaces[i].planes()) reader.add_plane(plane);
    reader.add_file_names({spaces[i].hostnames().begin(), spaces[i].hostnames().end()}, FileSteps::in_memory_stem(i));
    const FileStepSpans::Result file = std::move(reader).finish();
    for (const auto& plane : file.planes) {
      const std::string core = plane.host_name.value_or(file.host_name) + plane.plane_name;
      for (const StepSpan& s : plane.steps) steps[{core, s.step_num}] = s.end_ns - s.start_ns;
    }
  }
  return steps;
}

// The three readers agree: the same (core, step) pairs with the same durations (the pod viewer's records only for
// the steps it shows, its step count for all), and the pod viewer's kernel launch time is the step tools'; returns
// how many steps they found.
size_t expect_readers_agree(const std::vector<XSpace>& spaces) {
  const auto hosts = testing::step_databases(pointers(spaces));
  const PodSteps model = merge_step_databases(hosts);
  const auto analysis = analyze_pod_steps(model);
  const CoreStepDurations tools = step_tool_steps(model);
  const CoreStepDurations window = trace_window_steps(spaces);
  EXPECT_EQ(tools, window);
  const CoreStepDurations pod = pod_viewer_steps(analysis);
  for (const auto& [key, duration] : pod) {
    const auto it = tools.find(key);
    if (it == tools.end()) {
      ADD_FAILURE() << "the pod viewer's step " << key.second << " of " << key.first << " is not the step tools'";
      continue;
    }
    EXPECT_EQ(duration, it->second) << key.first << " step " << key.second;
  }
  const CoreStepDurations launches = step_tool_steps(model, EventType::kHostPrepare);
  for (const auto& [key, launch] : pod_viewer_steps(analysis, StepCategory::kKernelLaunch)) {
    EXPECT_NEAR(launch, launches.at(key), 1) << key.first << " step " << key.second;
  }
  std::set<int64_t> numbers;
  for (const auto& [key, duration] : tools) numbers.insert(key.second);
  EXPECT_EQ(analysis.counts().steps(), numbers.size());
  EXPECT_EQ(analysis.counts().planes_without_steps(), model.planes_without_steps);
  return tools.size();
}

TEST(OneStepDatabaseTest, ReadersAgreeOnTheRealTensorFlowFile) {
  const auto path = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!path) return;
  std::vector<XSpace> spaces;
  spaces.push_back(podscope::testing::read_xspace_file(*path));
  EXPECT_GE(expect_readers_agree(spaces), 2u) << "GPU:4 and GPU:6, one step each";
}

TEST(OneStepDatabaseTest, ReadersAgreeOnTheSyntheticPodWithEdgeStepsCut) {
  testing::SyntheticPodSpec spec;
  spec.cut_edge_steps = true;
  EXPECT_EQ(expect_readers_agree(testing::make_synthetic_pod(spec)), 4u * 3u) << "5 steps, the 2 at the edges cut";
  spec.cut_edge_steps = false;
  spec.gpu_plane = true;
  EXPECT_EQ(expect_readers_agree(testing::make_synthetic_pod(spec)), 4u * 5u);
}

// tests/data/analysis/ring_trainer_offsets: a real capture of 4 ring_trainer ranks by 4 agents.
TEST(OneStepDatabaseTest, ReadersAgreeOnARealCaptureOfFourRanks) {
  const fs::path run = fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/analysis/ring_trainer_offsets";
  std::vector<XSpace> spaces;
  for (int i = 0; i < 4; ++i)
    spaces.push_back(podscope::testing::read_xspace_file(run / ("host" + std::to_string(i) + ".xplane.pb")));
  EXPECT_GT(expect_readers_agree(spaces), 4u);
}

TEST(OneStepDatabaseTest, ReadersAgreeOnTheCudaProgramsNvtxSteps) {
  std::vector<XSpace> spaces;
  spaces.push_back(podscope::testing::read_xspace_file(kNvtxRun / "gpuhost.xplane.pb"));
  EXPECT_GT(expect_readers_agree(spaces), 1000u);
}

// A CUDA program traced by libpodscope_cupti (tests/cupti/cuda_training_loop.cu, captured on an H100) marks each
// step with an NVTX range "step": they land on /host:CPU's `NVTX thread <tid>` line and number the GPU's steps.
TEST(OneStepDatabaseTest, NvtxStepRangesOfARealCudaCaptureGiveItsSteps) {
  const XSpace space = podscope::testing::read_xspace_file(kNvtxRun / "gpuhost.xplane.pb");
  size_t ranges = 0;
  for (const auto& plane : space.planes()) {
    if (plane.name() != xspace::kHostPlaneName) continue;
    const HostStepMarkers found = read_host_step_markers(plane);
    EXPECT_EQ(found.source, StepSource::kNvtxRanges);
    ranges = found.markers.size();
  }
  EXPECT_GT(ranges, 1000u);
  const auto hosts = testing::step_databases({&space});
  const PodSteps model = merge_step_databases(hosts);
  ASSERT_EQ(model.cores.size(), 1u);
  const PodCore& gpu = model.cores[0];
  EXPECT_EQ(gpu.name, "gpuhost/device:GPU:0");
  EXPECT_EQ(gpu.core->source(), podscope::v1::STEP_SOURCE_NVTX_RANGES);
  EXPECT_EQ(model.planes_without_steps, 0u);
  // Every range but those the capture window cuts and those whose kernels fall outside it is a step.
  EXPECT_GE(gpu.steps.size() + 4, ranges);
  EXPECT_LE(gpu.steps.size(), ranges);

  auto outcome = analyze_run_files(kNvtxRun);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->analysis.counts().planes_without_steps(), 0u);
  EXPECT_EQ(outcome->analysis.counts().steps(), gpu.steps.size());
  EXPECT_EQ(outcome->summary_text.find("without steps"), std::string::npos) << outcome->summary_text;
  EXPECT_GT(outcome->result<tensorflow::profiler::InputPipelineAnalysisResult>().step_time_summary().average(), 0);
  // The launches on /host:CUPTI fill the GPU's idle time in the pod viewer as in the overview.
  double launch_us = 0;
  for (const auto& core : outcome->analysis.cores()) {
    launch_us += core.average_breakdown_us().at(static_cast<int>(StepCategory::kKernelLaunch));
  }
  EXPECT_GT(launch_us, 0);
}

// NVTX ranges named step* count as steps on NVTX lines only (train* counts on any line, as TensorFlow's markers);
// TensorFlow's markers win over them.
TEST(OneStepDatabaseTest, NvtxRangesCountByNameAndYieldToTensorFlowMarkers) {
  tensorflow::profiler::XPlane plane;
  xspace::XPlaneBuilder host(&plane);
  plane.set_name(std::string(xspace::kHostPlaneName));
  auto nvtx = host.line_named(std::string(xspace::kNvtxLinePrefix) + "7");
  nvtx.add_event("setup", 0, 100);
  nvtx.add_event("step", 100, 100);
  nvtx.add_event("forward", 110, 50);  // nested, not a step name anyway
  nvtx.add_event("step_2", 200, 100);
  host.line_named("python3").add_event("step", 300, 100);  // not an NVTX line
  HostStepMarkers found = read_host_step_markers(plane);
  EXPECT_EQ(found.source, StepSource::kNvtxRanges);
  ASSERT_EQ(found.markers.size(), 2u);
  EXPECT_EQ(found.markers[0].step_num, 0);
  EXPECT_EQ(found.markers[0].start_ns, 100);
  EXPECT_EQ(found.markers[1].step_num, 1);

  host.line_named("python3").add_event("train", 500, 100).add(xspace::kStepNumStat, int64_t{42});
  found = read_host_step_markers(plane);
  EXPECT_EQ(found.source, StepSource::kHostMarkers);
  ASSERT_EQ(found.markers.size(), 1u);
  EXPECT_EQ(found.markers[0].step_num, 42);
}

// A file whose planes name no host is named by its stem in every output that names hosts.
TEST(OneStepDatabaseTest, AFileWithoutAHostNameIsNamedByItsStem) {
  const podscope::testing::ScratchDirectory scratch("step_spans");
  const std::filesystem::path& dir = scratch.path();
  testing::SyntheticPodSpec spec;
  spec.ranks = 1;
  spec.input_stages = true;
  XSpace space = testing::make_synthetic_rank(spec, 0);
  space.clear_hostnames();
  for (auto& plane : *space.mutable_planes()) {
    for (auto& [id, stat] : *plane.mutable_stat_metadata()) {
      if (stat.name() == xspace::kHostNameStat) stat.set_name("not_a_host_name");
    }
  }
  {
    std::ofstream out(dir / "worker-7.xplane.pb", std::ios::binary);
    ASSERT_TRUE(space.SerializeToOstream(&out));
  }
  auto outcome = analyze_run_files(dir);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_GT(outcome->analysis.cores_size(), 0);
  EXPECT_EQ(outcome->analysis.cores(0).host_name(), "worker-7");
  ASSERT_GT(outcome->result<tensorflow::profiler::InputPipelineAnalysisResult>().hosts_size(), 0);
  EXPECT_EQ(outcome->result<tensorflow::profiler::InputPipelineAnalysisResult>().hosts(0).host_name(), "worker-7");
  for (const auto& host : outcome->result<tensorflow::profiler::CombinedTfDataStats>().bottleneck_analysis()) {
    EXPECT_EQ(host.host().rfind("worker-7", 0), 0u) << host.host();
  }
}

}  // namespace
}  // namespace podscope::analysis
