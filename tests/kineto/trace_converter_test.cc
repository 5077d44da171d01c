// The converter on small traces: where each kind of event lands, with which stats, and what bad input gets.
#include "kineto/trace_converter.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::kineto {
namespace {

using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;

constexpr int64_t kBaseNs = 1700000000000000000;

std::string read_golden(const std::string& name) {
  std::ifstream in(std::string(PODSCOPE_SOURCE_DIR) + "/tests/data/kineto/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Event {
  std::string name;
  int64_t start_ns;
  int64_t duration_ns;
  std::map<std::string, std::string> stats;  // every stat as text
};

// The events of a plane's line, by line name.
std::map<std::string, std::vector<Event>> lines_of(const XPlane& plane) {
  const xspace::XPlaneReader reader(plane);
  std::map<std::string, std::vector<Event>> lines;
  for (const auto& line : plane.lines()) {
    auto& events = lines[line.name()];
    reader.for_each_event(line, [&](const xspace::XEventView& e) {
      Event out{std::string(e.name()), e.start_ns(), e.end_ns() - e.start_ns(), {}};
      for (const auto& stat : e.proto().stats()) {
        const std::string stat_name(reader.stat_name(static_cast<int64_t>(stat.metadata_id())));
        if (auto s = reader.str_of(&stat)) out.stats[stat_name] = std::string(*s);
        else if (auto i = xspace::stat_as_int(stat)) out.stats[stat_name] = std::to_string(*i);
      }
      events.push_back(std::move(out));
    });
  }
  return lines;
}

XSpace convert_golden() {
  absl::StatusOr<XSpace> space = convert_kineto_json(read_golden("two_steps_gpu.pt.trace.json"));
  EXPECT_TRUE(space.ok()) << space.status();
  return space.ok() ? *space : XSpace();
}

TEST(KinetoConverter, KernelsAndCopiesGoOnTheirDevicesStreamLinesWithTheirStats) {
  const XSpace space = convert_golden();
  const XPlane* gpu = xspace::find_plane(space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  auto lines = lines_of(*gpu);
  ASSERT_TRUE(lines.contains("Stream #7(Compute,MemcpyH2D,Memset)"));
  ASSERT_TRUE(lines.contains("Stream #40(Compute)"));
  const auto& compute = lines["Stream #7(Compute,MemcpyH2D,Memset)"];
  ASSERT_EQ(compute.size(), 3u);
  EXPECT_EQ(compute[0].name, "Memcpy HtoD (Pageable -> Device)");
  EXPECT_EQ(compute[0].stats.at("bytes"), "4096");
  EXPECT_EQ(compute[1].name, "volta_sgemm_128x64_nn");
  EXPECT_EQ(compute[1].start_ns, kBaseNs + 1100000);
  EXPECT_EQ(compute[1].duration_ns, 200500);
  EXPECT_EQ(compute[1].stats.at("kernel_details"),
            "regs:126 static_shared:12288 dynamic_shared:0 grid:4,2,1 block:256,1,1");
  EXPECT_EQ(compute[1].stats.at("correlation_id"), "50");
  // The op that launched it: the cpu_op with its External id.
  EXPECT_EQ(compute[1].stats.at("framework_op"), "aten::mm");
  EXPECT_FALSE(compute[0].stats.contains("framework_op"));  // External id 5 is no op of the trace
  EXPECT_EQ(compute[2].name, "Memset (Device)");
  EXPECT_EQ(compute[2].stats.at("bytes"), "64");
}

TEST(KinetoConverter, NcclKernelsCarryTheirRecordParamCommsCollective) {
  const XSpace space = convert_golden();
  auto lines = lines_of(*xspace::find_plane(space, "/device:GPU:0"));
  const auto& nccl = lines["Stream #40(Compute)"];
  ASSERT_EQ(nccl.size(), 1u);  // the GPU-side nccl:all_reduce annotation repeats the kernel: left out
  EXPECT_EQ(nccl[0].stats.at("collective"), "allreduce");
  EXPECT_EQ(nccl[0].stats.at("bytes"), "4096");
  EXPECT_EQ(nccl[0].stats.at("replica_group"), "0,1,2,3");
  EXPECT_EQ(nccl[0].stats.at("process_group"), "0");
  EXPECT_EQ(nccl[0].stats.at("group_size"), "4");
}

TEST(KinetoConverter, DeviceStepsRunFromTheHostStepToItsLastLaunchedOp) {
  const XSpace space = convert_golden();
  auto lines = lines_of(*xspace::find_plane(space, "/device:GPU:0"));
  const auto& steps = lines[std::string(xspace::kStepsLineName)];
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].stats.at("step_num"), "7");
  EXPECT_EQ(steps[0].start_ns, kBaseNs + 1000000);
  EXPECT_EQ(steps[0].duration_ns, 1200000);  // the all-reduce launched in step 7 ends at 2200 µs
  EXPECT_EQ(steps[1].stats.at("step_num"), "8");
  EXPECT_EQ(steps[1].start_ns, kBaseNs + 2000000);
  EXPECT_EQ(steps[1].duration_ns, 800000);
}

TEST(KinetoConverter, HostThreadsAndRuntimeCallsKeepTheirLinesAndCorrelation) {
  const XSpace space = convert_golden();
  const XPlane* host = xspace::find_plane(space, xspace::kHostPlaneName);
  ASSERT_NE(host, nullptr);
  auto host_lines = lines_of(*host);
  ASSERT_TRUE(host_lines.contains("thread 100 (python)"));
  std::vector<std::string> names;
  for (const Event& e : host_lines["thread 100 (python)"]) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"ProfilerStep#7", "aten::mm", "record_param_comms", "nccl:all_reduce",
                                             "ProfilerStep#8"}));
  // Host events within a step are grouped into it (the step tools' host compute), as TF groups its own.
  for (const Event& e : host_lines["thread 100 (python)"]) {
    EXPECT_EQ(e.stats.at("group_id"), e.name == "ProfilerStep#8" ? "8" : "7") << e.name;
  }
  EXPECT_EQ(xspace::XPlaneReader(*host).str_stat(xspace::kHostNameStat).value_or(""), "rank 3");
  // One GPU: the rank's core.
  EXPECT_EQ(xspace::XPlaneReader(*xspace::find_plane(space, "/device:GPU:0")).int_stat("rank"), 3);
  const XPlane* cupti = xspace::find_plane(space, xspace::kCuptiHostPlaneName);
  ASSERT_NE(cupti, nullptr);
  auto api = lines_of(*cupti)["thread 100 (python)"];
  ASSERT_EQ(api.size(), 3u);
  EXPECT_EQ(api[0].name, "cudaLaunchKernel");
  EXPECT_EQ(api[0].stats.at("correlation_id"), "50");
}

TEST(KinetoConverter, CpuOnlyRankIsACoreNamedByItsRankWithAllReduceOpsStepsAndInput) {
  const std::string json = R"({"distributedInfo": {"backend": "gloo", "rank": 5, "world_size": 8},
    "baseTimeNanoseconds": 1000000000,
    "traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 9, "tid": 9, "ts": 10, "dur": 100},
      {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
       "pid": 9, "tid": 9, "ts": 12, "dur": 6},
      {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 9, "tid": 9, "ts": 20, "dur": 5},
      {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 9, "tid": 11, "ts": 30, "dur": 50,
       "args": {"Input type": ["float"], "Input Dims": [[1000]]}},
      {"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 9, "tid": 9, "ts": 12, "dur": 90}]})";
  absl::StatusOr<XSpace> space = convert_kineto_json(json);
  ASSERT_TRUE(space.ok()) << space.status();
  ASSERT_EQ(space->planes_size(), 1);
  const XPlane& core = space->planes(0);
  EXPECT_EQ(core.name(), "/device:CUSTOM:5");
  EXPECT_EQ(core.id(), 5);
  auto lines = lines_of(core);
  ASSERT_EQ(lines["Steps"].size(), 1u);
  EXPECT_EQ(lines["Steps"][0].stats.at("step_num"), "2");
  EXPECT_EQ(lines["Steps"][0].start_ns, 1000000000 + 10000);
  ASSERT_EQ(lines["Thread 11"].size(), 1u);
  EXPECT_EQ(lines["Thread 11"][0].name, "all-reduce");
  EXPECT_EQ(lines["Thread 11"][0].stats.at("collective"), "all_reduce");
  EXPECT_EQ(lines["Thread 11"][0].stats.at("bytes"), "4000");
  // The step is the Steps line, not an op; the DataLoader's batch is the core's input, a root input stage.
  ASSERT_EQ(lines["Thread 9"].size(), 2u);
  EXPECT_EQ(lines["Thread 9"][0].name, "train.py(12): step");
  EXPECT_EQ(lines["Thread 9"][1].name, "aten::add");
  ASSERT_EQ(lines["Input Pipeline"].size(), 1u);
  EXPECT_EQ(lines["Input Pipeline"][0].name, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
  EXPECT_EQ(lines["Input Pipeline"][0].stats.at("input_stage_id"), "1");
  EXPECT_EQ(lines["Input Pipeline"][0].stats.at("input_stage_parent_id"), "0");
}

// A trace taken on demand starts mid-step: the all-reduce of the step before (on gloo's thread 11) comes before the
// first batch. The core's Input Pipeline and Steps lines must not take an id that a thread (gloo's other thread, 12)
// has: its all-reduces would land on that line, which the analysis does not read as ops.
TEST(KinetoConverter, InputAndStepsLinesNeverTakeAThreadsLine) {
  const std::string json = R"({"distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 2},
    "traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 9, "tid": 11, "ts": 5, "dur": 3},
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 9, "tid": 9, "ts": 10, "dur": 100},
      {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
       "pid": 9, "tid": 9, "ts": 12, "dur": 6},
      {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 9, "tid": 12, "ts": 30, "dur": 50},
      {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 9, "tid": 13, "ts": 120, "dur": 5}]})";
  // A thread id at int64's end leaves no id above it: the core's lines take the lowest ids no thread has.
  const std::string at_the_end = absl::StrReplaceAll(json, {{"\"tid\": 13", "\"tid\": 9223372036854775807"}});
  for (const auto& [text, last_thread] :
       {std::pair{json, "Thread 13"}, std::pair{at_the_end, "Thread 9223372036854775807"}}) {
    absl::StatusOr<XSpace> space = convert_kineto_json(text);
    ASSERT_TRUE(space.ok()) << space.status();
    ASSERT_EQ(space->planes_size(), 1);
    std::set<int64_t> ids;
    for (const auto& line : space->planes(0).lines()) {
      EXPECT_TRUE(ids.insert(line.id()).second) << "line id " << line.id() << " taken twice";
    }
    auto lines = lines_of(space->planes(0));
    ASSERT_EQ(lines["Input Pipeline"].size(), 1u);
    EXPECT_EQ(lines["Input Pipeline"][0].name, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
    ASSERT_EQ(lines["Steps"].size(), 1u);
    for (const char* thread : {"Thread 11", "Thread 12", last_thread}) {
      ASSERT_EQ(lines[thread].size(), 1u) << thread;
      EXPECT_EQ(lines[thread][0].name, "all-reduce") << thread;
    }
  }
}

TEST(KinetoConverter, GlooCollectivesOfAGpuRankAreItsGpusHostCollectives) {
  // Tensors on the GPU, all-reduced by gloo on the host: the GPU idles until the host's collective ends.
  const std::string json = R"({"distributedInfo": {"backend": "gloo", "rank": 1, "world_size": 2},
    "baseTimeNanoseconds": 1000000000,
    "traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 9, "tid": 9, "ts": 10, "dur": 100},
      {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 15, "dur": 10,
       "args": {"device": 0, "stream": 7, "correlation": 1}},
      {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 9, "tid": 11, "ts": 30, "dur": 50,
       "args": {"Input type": ["float"], "Input Dims": [[1000]]}},
      {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 9, "tid": 9, "ts": 85, "dur": 2}]})";
  absl::StatusOr<XSpace> space = convert_kineto_json(json);
  ASSERT_TRUE(space.ok()) << space.status();
  const XPlane* gpu = xspace::find_plane(*space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  auto lines = lines_of(*gpu);
  // NCCL's annotation only launches its kernels: not a host collective.
  ASSERT_EQ(lines["Host collectives"].size(), 1u);
  const Event& all_reduce = lines["Host collectives"][0];
  EXPECT_EQ(all_reduce.name, "all-reduce");
  EXPECT_EQ(all_reduce.start_ns, 1000000000 + 30000);
  EXPECT_EQ(all_reduce.duration_ns, 50000);
  EXPECT_EQ(all_reduce.stats.at("collective"), "all_reduce");
  EXPECT_EQ(all_reduce.stats.at("bytes"), "4000");
  // The host thread keeps its annotation too.
  const XPlane* host = xspace::find_plane(*space, xspace::kHostPlaneName);
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(lines_of(*host)["Thread 11"].size(), 1u);
}

TEST(KinetoConverter, WithoutProfilerStepsTheFirstOptimizersStepsCloseSteps) {
  const std::string json = R"({"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 1, "tid": 1, "ts": 100, "dur": 10},
      {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#EMA.step", "pid": 1, "tid": 1, "ts": 111, "dur": 2},
      {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 1, "tid": 1, "ts": 200, "dur": 10},
      {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 1, "tid": 1, "ts": 300, "dur": 20}]})";
  absl::StatusOr<XSpace> space = convert_kineto_json(json);
  ASSERT_TRUE(space.ok()) << space.status();
  auto lines = lines_of(space->planes(0));
  const auto& steps = lines["Steps"];
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].start_ns, 110000);
  EXPECT_EQ(steps[0].duration_ns, 100000);
  EXPECT_EQ(steps[1].stats.at("step_num"), "2");
  EXPECT_EQ(steps[1].duration_ns, 110000);
}

TEST(KinetoConverter, ATraceWithoutStepsSaysHowToMarkThem) {
  absl::StatusOr<XSpace> space = convert_kineto_json(
      R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})");
  ASSERT_TRUE(space.ok()) << space.status();
  ASSERT_EQ(space->warnings_size(), 1);
  EXPECT_NE(space->warnings(0).find("ProfilerStep"), std::string::npos);
}

TEST(KinetoConverter, BadInputGetsAClearErrorNeverACrash) {
  const std::string golden = read_golden("two_steps_gpu.pt.trace.json");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not valid JSON"},
      {"not json at all", "not valid JSON"},
      {"[1, 2, 3]", "not valid JSON"},
      {R"({"traceEvents": 5})", "not valid JSON"},
      {R"({"schemaVersion": 1})", "no traceEvents"},
      {R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": 7, "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})",
       "at event 0"},
      {R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1e300, "dur": 1}]})",
       "out of range"},
      {R"({"traceEvents": [{}, {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 1, "ts": 1,
          "args": {"correlation": 99999999999999999999999}}]})",
       "at event 1"},
      {R"({"traceEvents": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]})",
       "at event 0"},
  };
  for (const auto& [json, expected] : cases) {
    absl::StatusOr<XSpace> space = convert_kineto_json(json);
    ASSERT_FALSE(space.ok()) << json;
    EXPECT_NE(space.status().message().find(expected), std::string::npos) << json << " → " << space.status();
  }
  // Every truncation of a real-shaped trace: an error or (cut between events) never a crash.
  for (size_t cut = 0; cut < golden.size(); cut += 7) {
    absl::StatusOr<XSpace> space = convert_kineto_json(std::string_view(golden).substr(0, cut));
    EXPECT_FALSE(space.ok()) << "cut at " << cut;
  }
}

TEST(KinetoConverter, NegativeDurationsAreKeptAsZeroAndCounted) {
  absl::StatusOr<XSpace> space = convert_kineto_json(
      R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": -3}]})");
  ASSERT_TRUE(space.ok()) << space.status();
  auto lines = lines_of(space->planes(0));
  ASSERT_EQ(lines["Thread 1"].size(), 1u);
  EXPECT_EQ(lines["Thread 1"][0].duration_ns, 0);
  bool counted = false;
  for (const auto& w : space->warnings()) counted |= w.find("1 events with a negative duration") != std::string::npos;
  EXPECT_TRUE(counted);
}

TEST(KinetoConverter, XlaNamesOfKinetoCollectives) {
  EXPECT_EQ(xla_collective_name("allreduce"), "all-reduce");
  EXPECT_EQ(xla_collective_name("all_reduce"), "all-reduce");
  EXPECT_EQ(xla_collective_name("_all_gather_base"), "all-gather");
  EXPECT_EQ(xla_collective_name("reduce_scatter_tensor"), "reduce-scatter");
  EXPECT_EQ(xla_collective_name("all_to_all"), "all-to-all");
  EXPECT_EQ(xla_collective_name("broadcast"), "");
}

}  // namespace
}  // namespace podscope::kineto
