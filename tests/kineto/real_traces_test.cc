// The real torch.profiler traces in ../shared/testdata/kineto through every tool: a 2-rank NCCL job's rank 0, two
// sampled ranks of one NCCL job, a gloo CPU-only rank. Skipped (or failed under PODSCOPE_REQUIRE_TESTDATA) without
// the shared test data.
#include <simdjson.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/runner/analysis_runner.h"
#include "analysis/step_category.h"
#include "kineto/trace_file.h"
#include "tests/analysis/synthetic_pod.h"
#include "tests/shared_testdata.h"

namespace podscope::kineto {
namespace {

namespace fs = std::filesystem;

// A fresh directory holding links to the named shared traces (the analysis writes its outputs beside them).
class RunDirectory {
 public:
  explicit RunDirectory(const std::string& name) : path_(fs::temp_directory_path() / ("podscope_kineto_" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~RunDirectory() { fs::remove_all(path_); }
  // False (after a skip or failure) when the shared file is missing.
  bool add(const std::string& trace) {
    auto file = testing::shared_testdata_file("kineto/" + trace);
    if (!file) return false;
    fs::create_symlink(fs::absolute(*file), path_ / trace);
    return true;
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The sum of the kernel events' durations in ns, read from the JSON by simdjson's DOM API, independently of the
// converter: per kernel name.
std::map<std::string, int64_t> kernel_ns_by_name(const fs::path& gz) {
  std::string json;
  const std::string command = "zcat '" + gz.string() + "'";
  FILE* pipe = popen(command.c_str(), "r");
  char buffer[1 << 16];
  for (size_t n; pipe && (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) json.append(buffer, n);
  if (pipe) pclose(pipe);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(json);
  std::map<std::string, int64_t> totals;
  for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
    std::string_view cat;
    if (e["cat"].get(cat) != simdjson::SUCCESS || cat != "kernel") continue;
    totals[std::string(std::string_view(e["name"]))] += std::llround(double(e["dur"]) * 1000.0);
  }
  return totals;
}

std::set<uint32_t> step_numbers(const analysis::AnalysisOutcome& outcome) {
  std::set<uint32_t> steps;
  for (const auto& map : outcome.analysis.pod_viewer().pod_stats_sequence().pod_stats_map())
    steps.insert(map.step_num());
  return steps;
}

// The all-reduce time (sync + compute) of every core in every step.
double all_reduce_us(const analysis::AnalysisOutcome& outcome) {
  double us = 0;
  for (const auto& map : outcome.analysis.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    for (const auto& [core, record] : map.pod_stats_per_core()) {
      for (const int category : {static_cast<int>(analysis::StepCategory::kAllReduceCompute),
                                 static_cast<int>(analysis::StepCategory::kAllReduceSync)}) {
        if (auto it = record.step_breakdown_us().find(category); it != record.step_breakdown_us().end())
          us += it->second;
      }
    }
  }
  return us;
}

TEST(KinetoRealTraces, EveryTraceConverts) {
  for (const char* trace : {"nccl_2rank_rank0.pt.trace.json.gz", "sampled_rank-0.pt.trace.json.gz",
                            "sampled_rank-1.pt.trace.json.gz", "gloo_cpu_only_rank34.pt.trace.json.gz"}) {
    auto file = testing::shared_testdata_file(std::string("kineto/") + trace);
    if (!file) return;
    absl::StatusOr<tensorflow::profiler::XSpace> space = read_kineto_trace_file(*file);
    ASSERT_TRUE(space.ok()) << space.status();
    EXPECT_GT(space->planes_size(), 0) << trace;
  }
}

TEST(KinetoRealTraces, NcclRankHasItsStepsKernelTotalsAndCollectives) {
  RunDirectory run("nccl_rank0");
  if (!run.add("nccl_2rank_rank0.pt.trace.json.gz")) return;
  absl::StatusOr<analysis::AnalysisOutcome> outcome = analysis::analyze_run_files(run.path());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->bad_files.empty());
  EXPECT_EQ(step_numbers(*outcome), (std::set<uint32_t>{4, 5, 6}));
  // GPU kernel stats: every kernel's total is the sum of its kernel events in the trace.
  const auto expected = kernel_ns_by_name(run.path() / "nccl_2rank_rank0.pt.trace.json.gz");
  std::map<std::string, int64_t> measured;
  for (const auto& report : outcome->kernel_stats.db.reports()) {
    measured[report.name()] += static_cast<int64_t>(report.total_duration_ns());
  }
  ASSERT_EQ(measured.size(), expected.size());
  for (const auto& [name, ns] : expected) {
    EXPECT_NEAR(measured[name], ns, 1) << name;
  }
  // NCCL kernels are the step's collectives.
  EXPECT_GT(all_reduce_us(*outcome), 0.0);
  bool nccl_collective = false;
  for (const auto& map : outcome->analysis.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    for (const auto& op : map.all_reduce_op_db()) nccl_collective |= op.name().starts_with("nccl");
  }
  EXPECT_TRUE(nccl_collective);
  // The step tools found the steps too.
  EXPECT_EQ(outcome->input_pipeline.step_details_size(), 3);
}

TEST(KinetoRealTraces, TwoSampledRanksMergeIntoOnePod) {
  RunDirectory run("sampled");
  if (!run.add("sampled_rank-0.pt.trace.json.gz") || !run.add("sampled_rank-1.pt.trace.json.gz")) return;
  absl::StatusOr<analysis::AnalysisOutcome> outcome = analysis::analyze_run_files(run.path());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->bad_files.empty());
  ASSERT_EQ(outcome->analysis.cores_size(), 2);
  std::set<std::string> hosts;
  for (const auto& core : outcome->analysis.cores()) hosts.insert(core.host_name());
  EXPECT_EQ(hosts, (std::set<std::string>{"rank 0", "rank 1"}));
  const std::set<uint32_t> steps = step_numbers(*outcome);
  ASSERT_FALSE(steps.empty());
  for (const auto& map : outcome->analysis.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    EXPECT_EQ(map.pod_stats_per_core_size(), 2) << "step " << map.step_num();
  }
  EXPECT_GT(all_reduce_us(*outcome), 0.0);  // the NCCL SendRecv kernels
}

TEST(KinetoRealTraces, GlooCpuOnlyRankIsItsRanksCoreWithAllReduces) {
  RunDirectory run("gloo");
  if (!run.add("gloo_cpu_only_rank34.pt.trace.json.gz")) return;
  absl::StatusOr<analysis::AnalysisOutcome> outcome = analysis::analyze_run_files(run.path());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(outcome->analysis.cores_size(), 1);
  EXPECT_EQ(outcome->analysis.cores(0).core_id(), 34u);
  EXPECT_EQ(step_numbers(*outcome), (std::set<uint32_t>{551}));
  EXPECT_GT(all_reduce_us(*outcome), 0.0);
}

TEST(KinetoRealTraces, TracesAnalyseBesideXSpaceFiles) {
  RunDirectory run("mixed");
  if (!run.add("gloo_cpu_only_rank34.pt.trace.json.gz")) return;
  analysis::testing::SyntheticPodSpec spec;
  spec.ranks = 1;
  std::ofstream(run.path() / "host0.xplane.pb", std::ios::binary)
      << analysis::testing::make_synthetic_rank(spec, 0).SerializeAsString();
  absl::StatusOr<analysis::AnalysisOutcome> outcome = analysis::analyze_run_files(run.path());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->bad_files.empty());
  EXPECT_EQ(outcome->analysis.counts().files(), 2u);
  std::set<uint32_t> cores;
  for (const auto& core : outcome->analysis.cores()) cores.insert(core.core_id());
  EXPECT_EQ(cores, (std::set<uint32_t>{0, 34}));
}

TEST(KinetoRealTraces, PodscopeAnalyzeRunsEveryToolOnADirectoryOfTraces) {
  RunDirectory run("cli");
  if (!run.add("sampled_rank-0.pt.trace.json.gz") || !run.add("sampled_rank-1.pt.trace.json.gz")) return;
  const std::string command =
      std::string(PODSCOPE_BINARY_DIR) + "/bin/podscope analyze " + run.path().string() + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  for (const char* written : {"pod_viewer.json", "report.html", "overview_page.json", "input_pipeline.json",
                              "kernel_stats.json", "framework_op_stats.json", "memory_profile.json",
                              "tf_data_stats.json", "pod.trace.json.gz", "pod.perfetto-trace"}) {
    EXPECT_TRUE(fs::exists(run.path() / written)) << written << "\n" << output;
  }
  EXPECT_EQ(output.find("no steps found"), std::string::npos) << output;
}

}  // namespace
}  // namespace podscope::kineto
