// analyze_run_directory end to end: synthetic run directories written as files, the real TensorFlow
// file from ../shared/testdata, the outputs it writes (legacy JSON schema, proto, report) and its errors.
#include "analysis/runner/analysis_runner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "analysis/rendering/renderers.h"
#include "analysis/tools/input_pipeline.h"
#include "analysis/tools/kernel_stats.h"
#include "analysis/tools/memory_profile.h"
#include "analysis/tools/op_stats.h"
#include "analysis/tools/overview_page.h"
#include "analysis/tools/tf_data_stats.h"
#include "analysis/tools/tool.h"
#include "analysis/pod/step_category.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/analysis/synthetic_pod.h"
#include "tests/scratch_directory.h"
#include "tests/shared_testdata.h"

namespace podscope::analysis {
namespace {

namespace fs = std::filesystem;
using testing::make_synthetic_pod;
using testing::SyntheticPodSpec;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A run of the four hosts' files of `data` (a folder of tests/data/analysis/), copied into `dir`.
void copy_four_hosts(const fs::path& data, const fs::path& dir) {
  for (int i = 0; i < 4; ++i) {
    const std::string name = "host" + std::to_string(i) + ".xplane.pb";
    fs::copy_file(data / name, dir / name);
  }
}

class RunDirectory : public ::testing::Test {
 protected:
  void write_pod(const SyntheticPodSpec& spec) { ASSERT_TRUE(testing::write_synthetic_pod(dir_, spec)); }

  static google::protobuf::Struct parse_json(const std::string& text) {
    google::protobuf::Struct s;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &s).ok());
    return s;
  }

  const podscope::testing::ScratchDirectory scratch_{"analysis"};
  const fs::path dir_ = scratch_.path();
};

const google::protobuf::Value& field(const google::protobuf::Struct& s, const std::string& key) {
  static const google::protobuf::Value kMissing;
  const auto it = s.fields().find(key);
  EXPECT_NE(it, s.fields().end()) << "missing key " << key;
  return it == s.fields().end() ? kMissing : it->second;
}

// Every key the legacy pod viewer reads from a per-core record (as in legacy_tpu_v2.pod_viewer.json).
const std::set<std::string> kLegacyCoreKeys = {"hostName",
                                               "chipId",
                                               "nodeId",
                                               "stepNum",
                                               "totalDurationUs",
                                               "highFlopsComputeUs",
                                               "lowFlopsComputeUs",
                                               "hostInfeedDurationUs",
                                               "hostOutfeedDurationUs",
                                               "allReduceComputeDurationUs",
                                               "allReduceSyncDurationUs",
                                               "sendDurationUs",
                                               "recvDurationUs",
                                               "bottleneck"};
const std::set<std::string> kLegacyChannelKeys = {"channelId",   "srcCoreId",   "dstCoreId", "dataSize",   "durationUs",
                                                  "sendDelayUs", "utilization", "hloNames",  "occurrences"};

TEST_F(RunDirectory, WritesEveryOutputInTheLegacySchema) {
  SyntheticPodSpec spec;
  spec.straggler_rank = 2;
  spec.straggler_delay_ns = 20'000'000;
  spec.clock_offsets_ns = {0, 3'000'000, -1'000'000, 0};
  write_pod(spec);
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->written_files.size(), 20u);
  for (const char* name :
       {"pod_viewer.json",       "pod_viewer.pb",           "pod_viewer.pb.json", "pod_analysis.pb",
        "report.html",           "pod_summary.txt",         "overview_page.pb",   "overview_page.json",
        "input_pipeline.pb",     "input_pipeline.json",     "tf_data_stats.pb",   "tf_data_stats.json",
        "kernel_stats.pb",       "kernel_stats.json",       "memory_profile.pb",  "memory_profile.json",
        "framework_op_stats.pb", "framework_op_stats.json", "trace_analysis.pb",  "trace_analysis.json"}) {
    EXPECT_TRUE(fs::exists(dir_ / name)) << name;
  }
  EXPECT_NE(outcome->summary_text.find("straggler: core 2 (host2)"), std::string::npos) << outcome->summary_text;
  EXPECT_NE(outcome->summary_text.find("all-reduce sync share"), std::string::npos);

  // Legacy JSON: every key on every record, also our GPU categories.
  const auto legacy = parse_json(read(dir_ / "pod_viewer.json"));
  const auto& maps = field(field(legacy, "podStatsSequence").struct_value(), "podStatsMap").list_value();
  ASSERT_EQ(maps.values_size(), spec.steps);
  for (const auto& map : maps.values()) {
    const auto& per_core = field(map.struct_value(), "podStatsPerCore").struct_value();
    ASSERT_EQ(per_core.fields_size(), 4);
    for (const auto& [core, record] : per_core.fields()) {
      for (const auto& key : kLegacyCoreKeys) field(record.struct_value(), key);
      for (const auto& g : analysis::generic_gpu_categories()) field(record.struct_value(), std::string(g.json_key));
    }
    const auto& channels = field(map.struct_value(), "channelDb").list_value();
    ASSERT_EQ(channels.values_size(), 4);
    for (const auto& c : channels.values()) {
      for (const auto& key : kLegacyChannelKeys) field(c.struct_value(), key);
      EXPECT_GE(field(c.struct_value(), "durationUs").number_value(), 0);
    }
    EXPECT_EQ(field(map.struct_value(), "allReduceOpDb").list_value().values_size(), 1);
    EXPECT_EQ(field(map.struct_value(), "coreIdToReplicaIdMap").struct_value().fields_size(), 4);
  }
  field(legacy, "runEnvironment");

  // The proto parses as PodViewerDatabase and matches what the call returned.
  podscope::v1::PodViewerDatabase db;
  ASSERT_TRUE(db.ParseFromString(read(dir_ / "pod_viewer.pb")));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(db, outcome->analysis.pod_viewer()));
  podscope::v1::PodViewerDatabase from_json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(read(dir_ / "pod_viewer.pb.json"), &from_json).ok());
  EXPECT_EQ(from_json.pod_stats_sequence().pod_stats_map_size(), spec.steps);

  const std::string html = read(dir_ / "report.html");
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // only the SVG namespace name
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
}

TEST_F(RunDirectory, EveryToolOfTheToolTableWritesItsFilesShowsItsTabAndHasAPage) {
  write_pod(SyntheticPodSpec{});
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const std::string html = read(dir_ / "report.html");
  std::set<std::string> names;
  size_t files = 0;
  const std::span<const Tool> tools = analysis_tools();
  ASSERT_EQ(outcome->results.size(), tools.size());
  for (size_t i = 0; i < tools.size(); ++i) {
    const Tool& tool = tools[i];
    EXPECT_TRUE(names.insert(std::string(tool.name)).second) << "two tools named " << tool.name;
    EXPECT_EQ(find_tool(tool.name), &tool);
    EXPECT_EQ(tool.parts.host_part != nullptr, tool.parts.wants_line != nullptr) << tool.name;
    const ToolResult& result = *outcome->results[i];
    for (const ToolFile& file : result.files(*outcome)) {
      EXPECT_TRUE(fs::exists(dir_ / file.name)) << tool.name << ": " << file.name;
      ++files;
    }
    EXPECT_FALSE(tool_tab_file(std::string(tool.name) + ".html").empty()) << tool.name;
    EXPECT_NE(tool_tab_file(std::string(tool.name) + ".js").find("drawers." + std::string(tool.tab_id) + " ="),
              std::string::npos)
        << tool.name;
    EXPECT_NE(html.find("<section id=\"tab-" + std::string(tool.tab_id) + "\" data-title=\"" +
                        std::string(tool.tab_title) + "\">"),
              std::string::npos)
        << tool.name;
    EXPECT_EQ(tool_result(*outcome, tool.name), &result);
    EXPECT_FALSE(result.page(*outcome).empty()) << tool.name;
  }
  EXPECT_EQ(outcome->written_files.size(), files + 1) << "every tool's files, then report.html";
  EXPECT_TRUE(outcome->written_files.back().ends_with("/report.html"));
  EXPECT_EQ(find_tool("no such tool"), nullptr);
}

TEST_F(RunDirectory, TensorFlowFileGivesABreakdownForEveryGpuWithAStep) {
  const auto tf_file = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!tf_file) return;
  fs::copy_file(*tf_file, dir_ / "host0.xplane.pb");
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const auto& a = outcome->analysis;
  EXPECT_EQ(a.counts().device_planes(), 8u);
  EXPECT_EQ(a.counts().planes_without_steps(), 6u);  // empty GPU planes are skipped without error
  EXPECT_EQ(a.pod_viewer().device_type(), "GPU");
  const auto& seq = a.pod_viewer().pod_stats_sequence();
  ASSERT_EQ(seq.pod_stats_map_size(), 1);  // one step per core: kept, nothing trimmed
  const auto& step = seq.pod_stats_map(0);
  EXPECT_EQ(step.step_num(), 0u);
  ASSERT_EQ(step.pod_stats_per_core_size(), 2);
  // Step times equal the Steps events of GPU:4 and GPU:6.
  EXPECT_NEAR(step.pod_stats_per_core().at(4).total_duration_us(), 19865.491, 1e-3);
  EXPECT_NEAR(step.pod_stats_per_core().at(6).total_duration_us(), 21310.352, 1e-3);
  for (const auto& [core, r] : step.pod_stats_per_core()) {
    double sum = 0;
    for (const auto& [id, v] : r.step_breakdown_us()) {
      EXPECT_TRUE(std::isfinite(v));
      EXPECT_GE(v, 0);
      sum += v;
    }
    EXPECT_NEAR(sum, r.total_duration_us(), 1e-3);
    const double busy =
        r.total_duration_us() - r.step_breakdown_us().at(static_cast<int>(analysis::StepCategory::kIdle));
    EXPECT_GT(busy, 0) << "core " << core;
  }
  EXPECT_GT(a.top_ops_size(), 0);
  for (const auto& core : a.cores()) EXPECT_TRUE(std::isfinite(core.average_step_us()));
}

TEST_F(RunDirectory, TensorFlowFileGivesKernelStatsAMemoryProfileAndOpStatsAsProtoAndJson) {
  const auto tf_file = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!tf_file) return;
  fs::copy_file(*tf_file, dir_ / "host0.xplane.pb");
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();

  tensorflow::profiler::KernelStatsDb kernels;
  ASSERT_TRUE(kernels.ParseFromString(read(dir_ / "kernel_stats.pb")));
  EXPECT_EQ(kernels.reports_size(), static_cast<int>(kMaxKernelReports));  // the file has more distinct kernels
  EXPECT_GT(outcome->result<KernelStatsResult>().reports_cut, 0u);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(kernels, outcome->result<KernelStatsResult>().db));
  tensorflow::profiler::KernelStatsDb kernels_from_json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(read(dir_ / "kernel_stats.json"), &kernels_from_json).ok());
  EXPECT_EQ(kernels_from_json.reports_size(), kernels.reports_size());

  tensorflow::profiler::MemoryProfile memory;
  ASSERT_TRUE(memory.ParseFromString(read(dir_ / "memory_profile.pb")));
  EXPECT_EQ(memory.memory_ids_size(), 4);  // GPU_1_bfc, GPU_4_bfc, GPU_6_bfc, gpu_host_bfc
  EXPECT_EQ(memory.num_hosts(), 1);
  tensorflow::profiler::MemoryProfile memory_from_json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(read(dir_ / "memory_profile.json"), &memory_from_json).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(memory_from_json, memory));

  tensorflow::profiler::TfStatsDatabase op_stats;
  ASSERT_TRUE(op_stats.ParseFromString(read(dir_ / "framework_op_stats.pb")));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(op_stats, outcome->result<OpStatsResult>().db));
  EXPECT_EQ(op_stats.device_type(), "GPU");
  EXPECT_GT(op_stats.device_records_cut(), 0u);  // more than 500 ops per side
  EXPECT_EQ(op_stats.without_idle().tf_stats_record_size(), 2 * static_cast<int>(kMaxOpStatsRecordsPerSide));
  tensorflow::profiler::TfStatsDatabase op_stats_from_json;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(read(dir_ / "framework_op_stats.json"), &op_stats_from_json).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(op_stats_from_json, op_stats));
  // The pod analysis is what it was without the tools' extra lines.
  EXPECT_EQ(outcome->analysis.counts().device_planes(), 8u);
  EXPECT_EQ(outcome->analysis.pod_viewer().pod_stats_sequence().pod_stats_map_size(), 1);
}

TEST_F(RunDirectory, TensorFlowDevicePlanesWithoutStepsLinesGetStepsFromGroupIds) {
  const auto tf_file = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!tf_file) return;
  tensorflow::profiler::XSpace space;
  {
    std::ifstream in(*tf_file, std::ios::binary);
    ASSERT_TRUE(space.ParseFromIstream(&in));
  }
  for (auto& plane : *space.mutable_planes()) {
    auto* lines = plane.mutable_lines();
    for (int i = lines->size() - 1; i >= 0; --i) {
      if (lines->Get(i).name() == "Steps") lines->DeleteSubrange(i, 1);
    }
  }
  {
    std::ofstream out(dir_ / "host0.xplane.pb", std::ios::binary);
    ASSERT_TRUE(space.SerializeToOstream(&out));
  }
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const auto& seq = outcome->analysis.pod_viewer().pod_stats_sequence();
  ASSERT_EQ(seq.pod_stats_map_size(), 1);
  EXPECT_EQ(seq.pod_stats_map(0).step_num(), 0u);  // group 0
  ASSERT_EQ(seq.pod_stats_map(0).pod_stats_per_core_size(), 2);
  // The group's device ops lie within the step TF marked.
  const double marked[] = {19865.491, 21310.352};
  int i = 0;
  for (int core : {4, 6}) {
    const auto& r = seq.pod_stats_map(0).pod_stats_per_core().at(core);
    EXPECT_GT(r.total_duration_us(), 0.5 * marked[i]) << "core " << core;
    EXPECT_LE(r.total_duration_us(), marked[i] + 1e-3) << "core " << core;
    ++i;
  }
}

TEST_F(RunDirectory, EmptyDirectoryIsAnErrorAndWritesNothing) {
  auto outcome = analyze_run_directory(dir_);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(outcome.status().message()).find(dir_.string()), std::string::npos);
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(RunDirectory, CorruptAndEmptyFilesAreNamedAndTheGoodOnesAnalysed) {
  write_pod(SyntheticPodSpec{});
  {
    std::ofstream out(dir_ / "host9.xplane.pb", std::ios::binary);
    out << "\x0a\xff\xff\x0f garbage";
  }
  std::ofstream(dir_ / "host8.xplane.pb").close();  // 0 bytes
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(outcome->bad_files.size(), 2u);
  EXPECT_NE(outcome->bad_files[0].find("host8.xplane.pb is empty"), std::string::npos) << outcome->bad_files[0];
  EXPECT_NE(outcome->bad_files[1].find("host9.xplane.pb"), std::string::npos) << outcome->bad_files[1];
  EXPECT_NE(outcome->summary_text.find("warning: file skipped: "), std::string::npos) << outcome->summary_text;
  EXPECT_GT(outcome->analysis.pod_viewer().pod_stats_sequence().pod_stats_map_size(), 0)
      << "the good files were analysed";
  EXPECT_TRUE(fs::exists(dir_ / "pod_viewer.json"));
}

// A host file cut after its first planes, and one whose last plane claims 2^40 bytes, are named and add nothing:
// the analysis equals that of the good files alone.
TEST_F(RunDirectory, TruncatedAndLyingFilesAreNamedAndContributeNothing) {
  write_pod(SyntheticPodSpec{});
  fs::remove(dir_ / "host3.xplane.pb");
  const auto good_only = analyze_run_files(dir_);
  ASSERT_TRUE(good_only.ok()) << good_only.status();
  write_pod(SyntheticPodSpec{});
  const std::string host3 = read(dir_ / "host3.xplane.pb");
  std::ofstream(dir_ / "host3.xplane.pb", std::ios::binary) << host3.substr(0, host3.size() * 3 / 4);
  std::ofstream(dir_ / "host4.xplane.pb", std::ios::binary)
      << read(dir_ / "host0.xplane.pb") + std::string{'\x0a', '\x80', '\x80', '\x80', '\x80', '\x80', '\x20'};
  const auto outcome = analyze_run_files(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(outcome->bad_files.size(), 2u);
  EXPECT_NE(outcome->bad_files[0].find("host3.xplane.pb"), std::string::npos) << outcome->bad_files[0];
  EXPECT_NE(outcome->bad_files[1].find("host4.xplane.pb"), std::string::npos) << outcome->bad_files[1];
  EXPECT_NE(outcome->bad_files[1].find("declared length 1099511627776"), std::string::npos) << outcome->bad_files[1];
  EXPECT_NE(outcome->summary_text.find("warning: file skipped: "), std::string::npos) << outcome->summary_text;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(outcome->analysis.pod_viewer(),
                                                                 good_only->analysis.pod_viewer()));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      outcome->result<tensorflow::profiler::OverviewPage>(), good_only->result<tensorflow::profiler::OverviewPage>()));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(outcome->result<OpStatsResult>().db,
                                                                 good_only->result<OpStatsResult>().db));
}

TEST_F(RunDirectory, OnlyBadFilesIsAnErrorNamingEachAndNothingIsWritten) {
  {
    std::ofstream out(dir_ / "host9.xplane.pb", std::ios::binary);
    out << "\x0a\xff\xff\x0f garbage";
  }
  std::ofstream(dir_ / "host8.xplane.pb").close();
  auto outcome = analyze_run_directory(dir_);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(outcome.status().message()).find("host9.xplane.pb"), std::string::npos) << outcome.status();
  EXPECT_NE(std::string(outcome.status().message()).find("host8.xplane.pb is empty"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "pod_viewer.json"));
}

TEST_F(RunDirectory, MissingDirectoryIsAnError) {
  auto outcome = analyze_run_directory(dir_ / "nope");
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kNotFound);
}

// The tf.data bottleneck analysis written beside the pod files.

TEST_F(RunDirectory, TensorFlowFileGivesItsPrefetchPipelinesInTfDataStats) {
  const auto tf_file = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!tf_file) return;
  fs::copy_file(*tf_file, dir_ / "host0.xplane.pb");
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  tensorflow::profiler::CombinedTfDataStats written;
  ASSERT_TRUE(written.ParseFromString(read(dir_ / "tf_data_stats.pb")));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      written, outcome->result<tensorflow::profiler::CombinedTfDataStats>()));
  EXPECT_TRUE(written.is_input_bound());
  ASSERT_EQ(written.tf_data_stats_size(), 1);
  const std::string host = written.tf_data_stats().begin()->first;
  EXPECT_EQ(host, "34.83.195.179:6003");  // the XSpace's hostnames: its host plane has no host_name stat
  ASSERT_EQ(written.bottleneck_analysis_size(), 2);
  for (const auto& b : written.bottleneck_analysis()) {
    EXPECT_EQ(b.iterator_long_name(), "Iterator::Prefetch::Generator");
    EXPECT_GT(b.iterator_latency_ps(), 0);
    EXPECT_LE(b.iterator_latency_ps(), b.max_latency_ps());
  }
  for (const auto& [id, pipeline] : written.tf_data_stats().at(host).input_pipelines()) {
    EXPECT_EQ(pipeline.num_calls(), 1);
    EXPECT_GT(pipeline.avg_latency_ps(), 0);
  }
  const google::protobuf::Struct json = parse_json(read(dir_ / "tf_data_stats.json"));
  EXPECT_TRUE(field(json, "isInputBound").bool_value());
  EXPECT_EQ(field(json, "bottleneckAnalysis").list_value().values_size(), 2);
  EXPECT_EQ(field(json, "tfDataStats").struct_value().fields_size(), 1);
  EXPECT_NE(tf_data_stats_to_text(outcome->result<tensorflow::profiler::CombinedTfDataStats>())
                .find("pipeline Host:0: calls 1"),
            std::string::npos)
      << tf_data_stats_to_text(outcome->result<tensorflow::profiler::CombinedTfDataStats>());
}

TEST_F(RunDirectory, AnnotatedInputStagesAreAnalysedAsPipelinesOfTheirHost) {
  auto spaces = make_synthetic_pod(SyntheticPodSpec{});
  {
    const int64_t t0 = SyntheticPodSpec{}.start_ns;
    xspace::XPlaneBuilder plane(xspace::find_or_add_plane(spaces[1], std::string(xspace::kCustomPlanePrefix) + "1", 1));
    auto line = plane.line_named(xspace::kInputPipelineLineName);
    line.add_event("next_batch", t0, 1'000'000)
        .add(xspace::kInputStageCategoryStat, std::string_view("enqueue"))
        .add(xspace::kInputStageIdStat, int64_t{1})
        .add(xspace::kInputStageParentIdStat, int64_t{0});
    line.add_event("decode_jpeg", t0 + 100'000, 800'000)
        .add(xspace::kInputStageCategoryStat, std::string_view("preprocess"))
        .add(xspace::kInputStageIdStat, int64_t{2})
        .add(xspace::kInputStageParentIdStat, int64_t{1});
  }
  for (size_t i = 0; i < spaces.size(); ++i) {
    std::ofstream out(dir_ / ("host" + std::to_string(i) + ".xplane.pb"), std::ios::binary);
    ASSERT_TRUE(spaces[i].SerializeToOstream(&out));
  }
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const auto& stats = outcome->result<tensorflow::profiler::CombinedTfDataStats>();
  ASSERT_EQ(stats.bottleneck_analysis_size(), 1);
  const auto& b = stats.bottleneck_analysis(0);
  EXPECT_EQ(b.input_pipeline(), "next_batch (core 1)");
  EXPECT_EQ(b.iterator_name(), "decode_jpeg");
  EXPECT_EQ(b.iterator_long_name(), "next_batch::decode_jpeg");
  EXPECT_EQ(b.iterator_latency_ps(), 800'000'000);
  const auto& core1 = outcome->analysis.pod_viewer().pod_stats_sequence().pod_stats_map(0).pod_stats_per_core().at(1);
  EXPECT_EQ(b.host(), core1.host_name());  // the host of the plane's file
  EXPECT_TRUE(stats.is_input_bound());
  EXPECT_TRUE(fs::exists(dir_ / "tf_data_stats.json"));
}

TEST_F(RunDirectory, RunWithoutTfDataSaysNoTfDataActivityCaptured) {
  write_pod(SyntheticPodSpec{});
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->result<tensorflow::profiler::CombinedTfDataStats>().is_input_bound());
  EXPECT_EQ(outcome->result<tensorflow::profiler::CombinedTfDataStats>().bottleneck_analysis_size(), 0);
  EXPECT_NE(tf_data_stats_to_text(outcome->result<tensorflow::profiler::CombinedTfDataStats>())
                .find("no tf.data activity captured"),
            std::string::npos)
      << tf_data_stats_to_text(outcome->result<tensorflow::profiler::CombinedTfDataStats>());
  tensorflow::profiler::CombinedTfDataStats written;
  ASSERT_TRUE(written.ParseFromString(read(dir_ / "tf_data_stats.pb")));
  EXPECT_TRUE(written.summary().starts_with("no tf.data activity captured"));
  EXPECT_TRUE(fs::exists(dir_ / "tf_data_stats.json"));
}

}  // namespace
}  // namespace podscope::analysis

namespace podscope::analysis {
namespace {

// tests/data/analysis/ring4_straggler: files written once, outputs reviewed once (see its README).
TEST(GoldenRunDirectory, Ring4StragglerGivesTheReviewedOutputs) {
  const fs::path golden = fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/analysis/ring4_straggler";
  const podscope::testing::ScratchDirectory scratch("analysis_golden");
  const fs::path& dir = scratch.path();
  copy_four_hosts(golden, dir);
  auto outcome = analyze_run_directory(dir);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(read(dir / "pod_summary.txt"), read(golden / "expected_pod_summary.txt"));
  EXPECT_EQ(read(dir / "pod_viewer.json"), read(golden / "expected_pod_viewer.json"));
}

}  // namespace
}  // namespace podscope::analysis

namespace podscope::analysis {
namespace {

// tests/data/analysis/ring_trainer_offsets: a real 4-agent capture of the ring trainer (see its README).
TEST(RealCapture, RingTrainerStragglerAndSkewedClocks) {
  const fs::path data = fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/analysis/ring_trainer_offsets";
  const podscope::testing::ScratchDirectory scratch("analysis_real");
  copy_four_hosts(data, scratch.path());
  auto outcome = analyze_run_directory(scratch.path());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const auto& a = outcome->analysis;

  ASSERT_EQ(a.stragglers_size(), 1) << outcome->summary_text;
  EXPECT_EQ(a.stragglers(0).core_id(), 2u);
  EXPECT_EQ(a.stragglers(0).reason(), "compute");

  auto average = [](const podscope::v1::CoreSummary& core, analysis::StepCategory c) {
    return core.average_breakdown_us().at(static_cast<int>(c));
  };
  ASSERT_EQ(a.cores_size(), 4);
  double others_compute = 0;
  for (const auto& core : a.cores()) {
    EXPECT_GT(core.step_count(), 20u);
    const double sync = average(core, analysis::StepCategory::kAllReduceSync);
    const double compute = average(core, analysis::StepCategory::kHighFlopsCompute) +
                           average(core, analysis::StepCategory::kLowFlopsCompute);
    if (core.core_id() == 2) {
      EXPECT_LT(sync, 1'000);
      EXPECT_EQ(core.bottleneck(), "High flops compute");
    } else {
      EXPECT_NEAR(sync, 20'000, 4'000) << "core " << core.core_id();
      EXPECT_EQ(core.bottleneck(), "AllReduce sync");
      others_compute += compute / 3;
    }
  }
  const double straggler_compute = average(a.cores(2), analysis::StepCategory::kHighFlopsCompute) +
                                   average(a.cores(2), analysis::StepCategory::kLowFlopsCompute);
  EXPECT_NEAR(straggler_compute - others_compute, 20'000, 4'000);

  EXPECT_EQ(a.counts().negative_channel_durations(), 0u);
  int channels = 0;
  for (const auto& step : a.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    for (const auto& c : step.channel_db()) {
      EXPECT_GE(c.duration_us(), 0) << "channel " << c.channel_id() << " step " << step.step_num();
      ++channels;
    }
  }
  EXPECT_GT(channels, 100);
}

// The step tools' files: the protos parse back to what the call returned, their JSON is lowerCamel like
// pod_viewer.pb.json; a pod without input delay is NOT input-bound.
TEST_F(RunDirectory, WritesTheStepToolsBesideThePodFiles) {
  SyntheticPodSpec spec;
  spec.input_delay_ns = 0;
  write_pod(spec);
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  tensorflow::profiler::OverviewPage overview;
  ASSERT_TRUE(overview.ParseFromString(read(dir_ / "overview_page.pb")));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      overview, outcome->result<tensorflow::profiler::OverviewPage>()));
  tensorflow::profiler::InputPipelineAnalysisResult input;
  ASSERT_TRUE(input.ParseFromString(read(dir_ / "input_pipeline.pb")));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      input, outcome->result<tensorflow::profiler::InputPipelineAnalysisResult>()));
  const std::string json = read(dir_ / "input_pipeline.json");
  EXPECT_NE(json.find("\"stepTimeSummary\""), std::string::npos);
  EXPECT_NE(json.find("type.googleapis.com/tensorflow.profiler.PerGenericStepDetails"), std::string::npos);
  EXPECT_NE(read(dir_ / "overview_page.json").find("\"runEnvironment\""), std::string::npos);
  EXPECT_EQ(input.step_details_size(), spec.steps);
  EXPECT_NE(input.recommendation().details(0).find("NOT input-bound"), std::string::npos);
  EXPECT_EQ(outcome->recommendation_text.find("input"), std::string::npos) << outcome->recommendation_text;
}

// A straggler whose delay is its input: the advice that leads names it, what it costs the others, and its host's
// slowest input stage from the input pipeline analyzer.
TEST_F(RunDirectory, AStragglerWaitingForInputLeadsTheAdviceWithItsSlowestInputStage) {
  SyntheticPodSpec spec;
  spec.straggler_rank = 1;
  spec.straggler_delay_ns = 10'000'000;
  spec.straggler_waits_for_input = true;
  spec.input_stages = true;
  write_pod(spec);
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const auto& analysis = outcome->analysis;
  ASSERT_EQ(analysis.stragglers_size(), 1) << outcome->summary_text;
  EXPECT_EQ(analysis.stragglers(0).core_id(), 1u);
  EXPECT_EQ(analysis.stragglers(0).reason(), "input");
  const auto& ranked = outcome->result<tensorflow::profiler::OverviewPage>().recommendation().ranked_advice();
  ASSERT_GT(ranked.size(), 0) << outcome->recommendation_text;
  EXPECT_NE(ranked[0].statement().find("Core 1 (host1) is a straggler"), std::string::npos) << ranked[0].statement();
  EXPECT_NE(ranked[0].statement().find("Its host waits for input"), std::string::npos) << ranked[0].statement();
  EXPECT_NE(ranked[0].statement().find("its slowest input stage is "), std::string::npos) << ranked[0].statement();
}

// Which files of a directory are the run's: XSpaces, and Chrome traces by their content whatever their names (as HTA
// reads a directory); other JSON is noted, and what a capture or an analysis wrote there is left out silently.
TEST_F(RunDirectory, ChromeTracesAreTakenByTheirContentOtherJsonNotedAndTheRunsOwnOutputsLeftOut) {
  write_pod(SyntheticPodSpec{});
  constexpr std::string_view kTrace =
      R"({"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,)"
      R"( "tid": 1, "ts": 5, "dur": 3}]})";
  std::ofstream(dir_ / "worker_rank7.json") << kTrace;
  std::ofstream(dir_ / "notes.json") << R"({"traceEvents_not": []})";
  std::ofstream(dir_ / "notes.txt") << "not JSON, not noted";
  std::ofstream(dir_ / "capture.json") << R"({"hosts": []})";
  std::ofstream(dir_ / "pod.trace.json.gz") << R"({"displayTimeUnit":"ns","traceEvents":[]})";  // our merged trace
  std::ofstream(dir_ / "pod.step3.trace.json.gz") << R"({"displayTimeUnit":"ns","traceEvents":[]})";
  const std::vector<std::string> expected = {"host0.xplane.pb", "host1.xplane.pb", "host2.xplane.pb", "host3.xplane.pb",
                                             "worker_rank7.json"};
  const auto names = [](const std::vector<run_directory::RunFile>& files) {
    std::vector<std::string> out;
    for (const run_directory::RunFile& file : files) out.push_back(file.name);
    return out;
  };
  std::vector<std::string> notes;
  auto listed = run_directory::list_run_files(dir_, &notes);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(names(*listed), expected);
  EXPECT_EQ(notes, std::vector<std::string>{
                       "ignored notes.json: not a Chrome trace (no traceEvents array in its first 1024 KiB)"});
  // The analysis' own JSON files (each tool's <stem>.json beside its <stem>.pb) are neither read nor noted.
  auto outcome = analyze_run_directory(dir_);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_NE(outcome->summary_text.find("note: ignored notes.json"), std::string::npos) << outcome->summary_text;
  notes.clear();
  listed = run_directory::list_run_files(dir_, &notes);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(names(*listed), expected);
  EXPECT_EQ(notes.size(), 1u);
}

}  // namespace
}  // namespace podscope::analysis
