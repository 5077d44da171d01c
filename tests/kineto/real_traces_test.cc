// The real torch.profiler traces in ../shared/testdata/kineto through every tool: a 2-rank NCCL job's rank 0, two
// sampled ranks of one NCCL job, a gloo CPU-only rank. Skipped (or failed under PODSCOPE_REQUIRE_TESTDATA) without
// the shared test data. And golden data (tests/data/kineto): a single-GPU rank on an H100 (torch 2.11, CUDA 13,
// tensorboard_trace_handler, 5 active steps of Linear/ReLU/Linear and SGD), three gloo ranks sharing an H200.
#include <simdjson.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "analysis/runner/analysis_runner.h"
#include "analysis/tools/input_pipeline.h"
#include "analysis/tools/kernel_stats.h"
#include "analysis/tools/memory_profile.h"
#include "analysis/tools/op_stats.h"
#include "analysis/tools/overview_page.h"
#include "analysis/tools/tf_data_stats.h"
#include "analysis/pod/step_category.h"
#include "kineto/trace_converter.h"
#include "kineto/trace_file.h"
#include "tests/analysis/synthetic_pod.h"
#include "tests/run_command.h"
#include "tests/scratch_directory.h"
#include "tests/shared_testdata.h"

namespace podscope::kineto {
namespace {

namespace fs = std::filesystem;
using podscope::testing::CommandResult;

// A fresh directory holding links to the named shared traces (the analysis writes its outputs beside them).
class RunDirectory {
 public:
  explicit RunDirectory(const std::string& name) : scratch_("kineto_" + name) {}
  // False (after a skip or failure) when the shared file is missing.
  bool add(const std::string& trace) {
    auto file = testing::shared_testdata_file("kineto/" + trace);
    if (!file) return false;
    fs::create_symlink(fs::absolute(*file), path() / trace);
    return true;
  }
  // A link to a golden trace of tests/data/kineto.
  void add_golden(const std::string& trace) {
    fs::create_symlink(fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/kineto" / trace, path() / trace);
  }
  const fs::path& path() const { return scratch_.path(); }

 private:
  testing::ScratchDirectory scratch_;
};

// Per event name, how many events of category `category` the trace holds and the sum of their durations in ns, read
// from the JSON by simdjson's DOM API, independently of the converter.
struct EventTotals {
  int64_t count = 0;
  int64_t ns = 0;
};
// A gzipped trace's text, inflated by zcat.
std::string inflated(const fs::path& gz) {
  std::string json;
  FILE* pipe = popen(("zcat '" + gz.string() + "'").c_str(), "r");
  char buffer[1 << 16];
  for (size_t n; pipe && (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) json.append(buffer, n);
  if (pipe) pclose(pipe);
  return json;
}

std::map<std::string, EventTotals> event_totals_by_name(const fs::path& gz, std::string_view category) {
  const std::string json = inflated(gz);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(json);
  std::map<std::string, EventTotals> totals;
  for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
    std::string_view cat;
    if (e["cat"].get(cat) != simdjson::SUCCESS || cat != category) continue;
    EventTotals& t = totals[std::string(std::string_view(e["name"]))];
    ++t.count;
    t.ns += std::llround(double(e["dur"]) * 1000.0);
  }
  return totals;
}

// The sum of the kernel events' durations in ns, per kernel name.
std::map<std::string, int64_t> kernel_ns_by_name(const fs::path& gz) {
  std::map<std::string, int64_t> ns;
  for (const auto& [name, totals] : event_totals_by_name(gz, "kernel")) ns[name] = totals.ns;
  return ns;
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

// The conversion RunFileReader keeps, serialized plane by plane as it is built (the NCCL rank's 40,573 events pass
// the build's flushes), is the XSpace read_kineto_trace_file builds whole, and a parse fed the text in pieces of any
// size reads what a parse fed all of it reads.
TEST(KinetoRealTraces, StreamedConversionIsTheWholeOnesBytesWhateverThePieces) {
  for (const char* trace : {"nccl_2rank_rank0.pt.trace.json.gz", "sampled_rank-0.pt.trace.json.gz",
                            "gloo_cpu_only_rank34.pt.trace.json.gz"}) {
    auto file = testing::shared_testdata_file(std::string("kineto/") + trace);
    if (!file) return;
    absl::StatusOr<tensorflow::profiler::XSpace> whole = read_kineto_trace_file(*file);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const std::string text = inflated(*file);
    for (const size_t piece : {size_t{4093}, size_t{1} << 20, text.size()}) {
      KinetoTraceParser parser(text.size());
      for (size_t at = 0; at < text.size(); at += piece) {
        ASSERT_TRUE(parser.feed(std::string_view(text).substr(at, piece)).ok()) << trace;
      }
      absl::StatusOr<KinetoTrace> parsed = parser.finish();
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      const std::string bytes = build_xspace_bytes(std::move(*parsed));
      tensorflow::profiler::XSpace streamed;
      ASSERT_TRUE(streamed.ParseFromString(bytes));
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(streamed, *whole))
          << trace << " in pieces of " << piece;
      EXPECT_EQ(bytes.size(), whole->ByteSizeLong());  // maps' entries may come in another order, no more
    }
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
  for (const auto& report : outcome->result<analysis::KernelStatsResult>().db.reports()) {
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
  EXPECT_EQ(outcome->result<tensorflow::profiler::InputPipelineAnalysisResult>().step_details_size(), 3);
}

TEST(KinetoRealTraces, H100RankKernelsJoinTheirOpsAndHostWorkExplainsTheIdleDevice) {
  const std::string trace = "h100_linear_relu_sgd.pt.trace.json.gz";
  RunDirectory run("h100");
  run.add_golden(trace);
  absl::StatusOr<analysis::AnalysisOutcome> outcome = analysis::analyze_run_files(run.path());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->bad_files.empty());
  EXPECT_EQ(step_numbers(*outcome), (std::set<uint32_t>{3, 4, 5, 6, 7}));
  // Step times are the trace's ProfilerStep#N durations (the device's work ends within each host step).
  const std::map<uint32_t, double> profiler_step_ms = {
      {3, 2.566936}, {4, 2.025587}, {5, 2.119665}, {6, 1.993276}, {7, 1.965614}};
  for (const auto& map : outcome->analysis.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    for (const auto& [core, record] : map.pod_stats_per_core()) {
      EXPECT_NEAR(record.total_duration_us() / 1e3, profiler_step_ms.at(map.step_num()), 1e-5) << map.step_num();
    }
  }
  // Kernel totals are the sums of their kernel events; every kernel is joined to the aten op that launched it.
  const auto expected = kernel_ns_by_name(run.path() / trace);
  std::map<std::string, int64_t> measured;
  for (const auto& report : outcome->result<analysis::KernelStatsResult>().db.reports()) {
    measured[report.name()] += static_cast<int64_t>(report.total_duration_ns());
    EXPECT_TRUE(report.op_name().starts_with("aten::")) << report.name() << " op " << report.op_name();
  }
  ASSERT_EQ(measured.size(), expected.size());
  for (const auto& [name, ns] : expected) EXPECT_NEAR(measured[name], ns, 1) << name;
  // Framework op stats count the device time under those ops: all 95 device events (80 kernels, 10 memsets, 5
  // memcpys) have an op; aten::mm's self time is its 15 kernels' (3 per step, in the backward pass).
  EXPECT_EQ(outcome->result<analysis::OpStatsResult>().warnings.device_events_without_op, 0u);
  int64_t mm_kernels_ns = 0;
  for (const auto& [name, ns] : expected) {
    if (name.find("sgemm_256x128") != std::string::npos || name.find("_nn_n_tilesize64x128") != std::string::npos)
      mm_kernels_ns += ns;
  }
  bool found_mm = false;
  for (const auto& record : outcome->result<analysis::OpStatsResult>().db.with_idle().tf_stats_record()) {
    if (record.host_or_device() != "Device" || record.op_name() != "aten::mm") continue;
    found_mm = true;
    EXPECT_EQ(record.op_type(), "aten");
    EXPECT_EQ(record.occurrences(), 15u);
    EXPECT_NEAR(record.total_self_time_in_us() * 1e3, static_cast<double>(mm_kernels_ns), 2.0);
  }
  EXPECT_TRUE(found_mm);
  // The device idles while the host runs the step (its ops and Python): host compute, not unexplained time.
  EXPECT_EQ(outcome->recommendation_text.find("unexplained"), std::string::npos) << outcome->recommendation_text;
}

// A GPU rank's ATen ops are framework op stats' host side: every `cpu_op` of the trace, counted and timed as the
// trace has it, under its namespace as the op type.
TEST(KinetoRealTraces, H100RankHostOpsAreTheTracesCpuOps) {
  const std::string trace = "h100_linear_relu_sgd.pt.trace.json.gz";
  RunDirectory run("h100_host_ops");
  run.add_golden(trace);
  absl::StatusOr<analysis::AnalysisOutcome> outcome = analysis::analyze_run_files(run.path());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const auto expected = event_totals_by_name(run.path() / trace, "cpu_op");
  ASSERT_GT(expected.size(), 20u);
  std::map<std::string, const tensorflow::profiler::TfStatsRecord*> host_rows;
  for (const auto& record : outcome->result<analysis::OpStatsResult>().db.with_idle().tf_stats_record()) {
    if (record.host_or_device() == "Host" && record.op_type() != "IDLE") host_rows[record.op_name()] = &record;
  }
  EXPECT_EQ(host_rows.size(), expected.size());
  int64_t host_ns = 0;
  for (const auto& [name, totals] : expected) {
    host_ns += totals.ns;
    auto row = host_rows.find(name);
    ASSERT_NE(row, host_rows.end()) << name;
    EXPECT_EQ(static_cast<int64_t>(row->second->occurrences()), totals.count) << name;
    EXPECT_NEAR(row->second->total_time_in_us() * 1e3, static_cast<double>(totals.ns), 1.0 * totals.count) << name;
    EXPECT_LE(row->second->total_self_time_in_us(), row->second->total_time_in_us() + 1e-9) << name;
    const size_t colons = name.find("::");
    EXPECT_EQ(row->second->op_type(), colons == std::string::npos ? "unknown" : name.substr(0, colons)) << name;
  }
  // aten::addmm runs twice a step (two Linear layers) on the host; its GPU kernels are the device rows'.
  EXPECT_EQ(expected.at("aten::addmm").count, 10);
  EXPECT_GT(outcome->result<analysis::OpStatsResult>().host_self_ns, 0);
  EXPECT_LE(outcome->result<analysis::OpStatsResult>().host_self_ns, host_ns);
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

// Per ProfilerStep#N of a trace (the host's user annotation), the summed duration in ns of its `gloo:all_reduce`
// annotations, read from the JSON independently of the converter.
std::map<uint32_t, int64_t> gloo_all_reduce_ns_by_step(const fs::path& gz) {
  const std::string json = inflated(gz);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(json);
  struct Span {
    double start_us, end_us;
  };
  std::map<uint32_t, Span> steps;
  std::vector<Span> all_reduces;
  for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
    std::string_view cat, name;
    if (e["cat"].get(cat) != simdjson::SUCCESS || cat != "user_annotation" || e["name"].get(name)) continue;
    const Span span{double(e["ts"]), double(e["ts"]) + double(e["dur"])};
    if (name.starts_with("ProfilerStep#")) steps[std::stoul(std::string(name.substr(13)))] = span;
    if (name == "gloo:all_reduce") all_reduces.push_back(span);
  }
  std::map<uint32_t, int64_t> ns;
  for (const Span& a : all_reduces) {
    for (const auto& [step, s] : steps) {
      if (a.start_us >= s.start_us && a.start_us < s.end_us) ns[step] += std::llround((a.end_us - a.start_us) * 1e3);
    }
  }
  return ns;
}

// Three ranks of DDP over gloo with their tensors on one H200 (torch 2.11, CUDA 13, --device cuda), rank 1 computing
// 30 ms more per step: the ranks' GPUs idle in gloo's host all-reduce, and that wait is their all-reduce sync.
TEST(KinetoRealTraces, H200GlooRanksWaitForTheSlowRankAsAllReduceSync) {
  RunDirectory run("h200_gloo");
  std::map<std::string, std::map<uint32_t, int64_t>> all_reduce_ns;  // host ("rank r") → step → ns
  for (const std::string rank : {"0", "1", "2"}) {
    const std::string trace = "rank" + rank + ".pt.trace.json.gz";
    fs::create_symlink(fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/kineto/h200_ddp_gloo_cuda" / trace,
                       run.path() / trace);
    all_reduce_ns["rank " + rank] = gloo_all_reduce_ns_by_step(run.path() / trace);
  }
  absl::StatusOr<analysis::AnalysisOutcome> outcome = analysis::analyze_run_files(run.path());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(outcome->analysis.cores_size(), 3);
  std::map<uint32_t, std::string> host_of;
  for (const auto& core : outcome->analysis.cores()) host_of[core.core_id()] = core.host_name();
  EXPECT_EQ(step_numbers(*outcome), (std::set<uint32_t>{2, 3, 4, 5}));
  // Each core's sync: its all-reduce's duration minus the step's shortest, the slow rank's.
  constexpr int kSync = static_cast<int>(analysis::StepCategory::kAllReduceSync);
  for (const auto& map : outcome->analysis.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    const uint32_t step = map.step_num();
    int64_t shortest = INT64_MAX;
    for (const auto& [host, by_step] : all_reduce_ns) shortest = std::min(shortest, by_step.at(step));
    ASSERT_EQ(map.pod_stats_per_core_size(), 3);
    for (const auto& [core, record] : map.pod_stats_per_core()) {
      const std::string& host = host_of.at(core);
      const auto sync = record.step_breakdown_us().find(kSync);
      const double sync_us = sync == record.step_breakdown_us().end() ? 0.0 : sync->second;
      EXPECT_NEAR(sync_us * 1e3, static_cast<double>(all_reduce_ns[host].at(step) - shortest), 2.0)
          << host << " step " << step;
      if (host != "rank 1") {
        EXPECT_NEAR(sync_us / 1e3, 30.0, 9.0) << host << " step " << step;
      }
    }
  }
  ASSERT_EQ(outcome->analysis.stragglers_size(), 1);
  EXPECT_EQ(outcome->analysis.stragglers(0).host_name(), "rank 1");
  EXPECT_EQ(outcome->analysis.stragglers(0).straggling_steps(), 4u);
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

// `podscope analyze` on `dir` or on files (then `--out`): its exit code and what it printed.
CommandResult podscope_analyze(const std::string& arguments) {
  return podscope::testing::run_command(std::string(PODSCOPE_BINARY_DIR) + "/bin/podscope analyze " + arguments);
}

TEST(KinetoRealTraces, PodscopeAnalyzeRunsEveryToolOnADirectoryOfTraces) {
  RunDirectory run("cli");
  if (!run.add("sampled_rank-0.pt.trace.json.gz") || !run.add("sampled_rank-1.pt.trace.json.gz")) return;
  const CommandResult analyzed = podscope_analyze(run.path().string());
  const std::string& output = analyzed.output;
  ASSERT_EQ(analyzed.exit_code, 0) << output;
  for (const char* written : {"pod_viewer.json", "report.html", "overview_page.json", "input_pipeline.json",
                              "kernel_stats.json", "framework_op_stats.json", "memory_profile.json",
                              "tf_data_stats.json", "pod.trace.json.gz", "pod.perfetto-trace"}) {
    EXPECT_TRUE(fs::exists(run.path() / written)) << written << "\n" << output;
  }
  EXPECT_EQ(output.find("no steps found"), std::string::npos) << output;
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The outputs that say what the analysis found (report.html's title names its directory).
constexpr const char* kFindings[] = {"pod_viewer.json",     "pod_analysis.pb",    "overview_page.json",
                                     "input_pipeline.json", "kernel_stats.json",  "framework_op_stats.json",
                                     "memory_profile.json", "tf_data_stats.json", "pod.perfetto-trace"};

// HTA reads every *.json[.gz] of a directory whose content is a Chrome trace, and HTA's examples name them
// `<job>_rank<r>.json.gz`: the shared traces under such names, as a directory and as files given, analyse as they
// do under torch.profiler's names; a JSON file that is no trace is named in a note.
TEST(KinetoRealTraces, PodscopeAnalyzeReadsChromeTracesByTheirContentWhateverTheirNames) {
  RunDirectory named("named"), plain("plain"), given("given");
  const std::vector<std::string> stems = {"gloo_cpu_only_rank34", "nccl_2rank_rank0", "sampled_rank-0",
                                          "sampled_rank-1"};
  for (const std::string& stem : stems) {
    if (!named.add(stem + ".pt.trace.json.gz")) return;
    fs::copy_file(named.path() / (stem + ".pt.trace.json.gz"), plain.path() / (stem + ".json.gz"));
  }
  std::ofstream(plain.path() / "notes.json") << R"({"run": "a JSON file that is no trace"})";
  const CommandResult by_name = podscope_analyze(named.path().string());
  ASSERT_EQ(by_name.exit_code, 0) << by_name.output;
  const CommandResult by_content = podscope_analyze(plain.path().string());
  ASSERT_EQ(by_content.exit_code, 0) << by_content.output;
  EXPECT_NE(by_content.output.find("note: ignored notes.json: not a Chrome trace"), std::string::npos)
      << by_content.output;
  std::string files;
  for (const std::string& stem : stems) files += " " + (plain.path() / (stem + ".json.gz")).string();
  const CommandResult as_files = podscope_analyze(files + " --out " + given.path().string());
  ASSERT_EQ(as_files.exit_code, 0) << as_files.output;
  for (const char* finding : kFindings) {
    const std::string expected = file_text(named.path() / finding);
    EXPECT_FALSE(expected.empty()) << finding;
    EXPECT_EQ(file_text(plain.path() / finding), expected) << finding;
    EXPECT_EQ(file_text(given.path() / finding), expected) << finding;
  }
  EXPECT_EQ(file_text(plain.path() / "pod_summary.txt"),
            file_text(named.path() / "pod_summary.txt") +
                "note: ignored notes.json: not a Chrome trace (no traceEvents array in its first 1024 KiB)\n");
  // The analysis' own outputs (pod.trace.json.gz is a Chrome trace too) are not read back, nor noted, next time;
  // the hosts are merged from the databases the first analysis wrote beside them.
  const CommandResult again = podscope_analyze(plain.path().string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  std::string expected = by_content.output;
  const std::string analysed = "0 of 4 hosts merged from their host databases";
  ASSERT_NE(expected.find(analysed), std::string::npos) << expected;
  expected.replace(expected.find(analysed), analysed.size(), "4 of 4 hosts merged from their host databases");
  EXPECT_EQ(again.output, expected);
}

TEST(KinetoRealTraces, PodscopeAnalyzeReadsATraceNamedAsHtasExamplesAre) {
  RunDirectory named("hta_named"), hta("hta");
  if (!named.add("gloo_cpu_only_rank34.pt.trace.json.gz")) return;
  fs::copy_file(named.path() / "gloo_cpu_only_rank34.pt.trace.json.gz", hta.path() / "some_rank3.json.gz");
  const CommandResult by_name = podscope_analyze(named.path().string());
  const CommandResult hta_named = podscope_analyze(hta.path().string());
  ASSERT_EQ(hta_named.exit_code, 0) << hta_named.output;
  EXPECT_EQ(hta_named.output.find("no torch.profiler traces"), std::string::npos) << hta_named.output;
  for (const char* finding : kFindings) {
    EXPECT_EQ(file_text(hta.path() / finding), file_text(named.path() / finding)) << finding;
  }
}

}  // namespace
}  // namespace podscope::kineto
