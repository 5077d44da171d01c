// The pod trace files written from a run directory: pod.perfetto-trace decoded with the tests' own reading
// of Perfetto's messages, pod.trace.json.gz parsed for exact nesting, and the windowed traces.
#include "trace_writers/pod_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <regex>
#include <set>

#include "analysis/steps/step_database.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/analysis/synthetic_pod.h"
#include "tests/proto/xspace/xspace_contents.h"
#include "tests/scratch_directory.h"
#include "tests/shared_testdata.h"
#include "tests/trace_writers/gzip_reader.h"
#include "tests/trace_writers/perfetto_trace_reader.h"

namespace podscope::trace_writers {
namespace {

using podscope::testing::gunzip_file;

namespace fs = std::filesystem;
using analysis::testing::SyntheticPodSpec;
using testing::DecodedEvent;
using testing::DecodedTrace;

SyntheticPodSpec four_rank_spec() {
  SyntheticPodSpec spec;
  spec.ranks = 4;
  spec.steps = 4;
  spec.compute_events_per_step = 3;
  spec.straggler_rank = 2;
  spec.straggler_delay_ns = 4'000'000;
  spec.input_delay_ns = 1'000'000;
  spec.clock_offsets_ns = {0, 20'000'000, -7'000'000, 3'000'123};
  return spec;
}

struct InputCounts {
  uint64_t slices = 0;
  uint64_t counter_values = 0;
  uint64_t sends = 0;
};

// Writes one file per rank, each host plane with a few counter values and its capture start.
InputCounts write_run(const fs::path& dir, const SyntheticPodSpec& spec) {
  InputCounts counts;
  for (int rank = 0; rank < spec.ranks; ++rank) {
    auto space = analysis::testing::make_synthetic_rank(spec, rank);
    xspace::XPlaneBuilder host(xspace::find_or_add_plane(space, xspace::kHostPlaneName));
    const int64_t offset = spec.clock_offsets_ns[rank];
    host.stats().add(xspace::kCaptureStartStat, spec.start_ns + offset);
    auto counters = host.line_named(xspace::kCountersLineName);
    for (int i = 0; i < 5; ++i) counters.add_counter("cpu_util", spec.start_ns + offset + i * 1'000'000, 0.5 * i);
    for (const auto& plane : space.planes()) {
      for (const auto& line : plane.lines()) {
        const bool counter_line = line.name() == xspace::kCountersLineName;
        (counter_line ? counts.counter_values : counts.slices) += line.events_size();
      }
    }
    counts.sends += static_cast<uint64_t>(spec.steps * spec.chunks);
    std::ofstream out(dir / ("host" + std::to_string(rank) + ".xplane.pb"), std::ios::binary);
    space.SerializeToOstream(&out);
  }
  return counts;
}

// Per track: begins and ends in timestamp order (ties in file order, as the trace processor sorts) never
// close more than they opened, and close all of it.
std::vector<std::string> unbalanced_tracks(const DecodedTrace& trace) {
  std::map<uint64_t, std::vector<const DecodedEvent*>> by_track;
  for (const auto& e : trace.events) {
    if (e.type == 1 || e.type == 2) by_track[e.track_uuid].push_back(&e);
  }
  std::vector<std::string> bad;
  for (auto& [uuid, events] : by_track) {
    std::stable_sort(events.begin(), events.end(),
                     [](const DecodedEvent* a, const DecodedEvent* b) { return a->timestamp < b->timestamp; });
    int depth = 0;
    bool negative = false;
    for (const auto* e : events) {
      depth += e->type == 1 ? 1 : -1;
      negative |= depth < 0;
    }
    if (negative || depth != 0) bad.push_back(trace.tracks.at(uuid).name);
  }
  return bad;
}

TEST(PodTrace, PerfettoTraceHoldsEveryEventOnDescribedTracksWithOneFlowPerTransfer) {
  const podscope::testing::ScratchDirectory scratch("pod_trace_whole");
  const fs::path& dir = scratch.path();
  const SyntheticPodSpec spec = four_rank_spec();
  const InputCounts input = write_run(dir, spec);

  auto files = write_run_traces(dir, TraceSelection{});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->perfetto, dir / "pod.perfetto-trace");
  EXPECT_EQ(files->counts.slices, input.slices);

  const DecodedTrace trace = testing::read_perfetto_trace(files->perfetto);
  ASSERT_EQ(trace.error, "");
  EXPECT_TRUE(trace.sequences_without_cleared_state.empty());

  uint64_t slices = 0, counter_values = 0;
  std::map<uint64_t, std::vector<const DecodedEvent*>> flow_starts, flow_ends;
  for (const auto& e : trace.events) {
    ASSERT_TRUE(trace.tracks.contains(e.track_uuid)) << "event on an undescribed track " << e.track_uuid;
    EXPECT_TRUE(e.interning_resolved) << e.name;
    if (e.type == 1) ++slices;
    if (e.type == 4) {
      ++counter_values;
      EXPECT_TRUE(trace.tracks.at(e.track_uuid).is_counter);
      EXPECT_TRUE(e.counter_value.has_value());
    }
    for (uint64_t id : e.flow_ids) flow_starts[id].push_back(&e);
    for (uint64_t id : e.terminating_flow_ids) flow_ends[id].push_back(&e);
  }
  EXPECT_EQ(slices, input.slices);
  EXPECT_EQ(counter_values, input.counter_values);
  EXPECT_TRUE(unbalanced_tracks(trace).empty()) << unbalanced_tracks(trace).front();

  // Every send has its recv-done: one flow start and one flow end, from the sender's process to the next rank's.
  EXPECT_EQ(flow_starts.size(), input.sends);
  EXPECT_EQ(flow_ends.size(), input.sends);
  auto process_of = [&](const DecodedEvent* e) {
    return trace.tracks.at(trace.tracks.at(e->track_uuid).parent_uuid).name;
  };
  for (const auto& [id, starts] : flow_starts) {
    ASSERT_EQ(starts.size(), 1u);
    ASSERT_EQ(flow_ends[id].size(), 1u) << "flow " << id << " has no single end";
    const DecodedEvent* send = starts[0];
    const DecodedEvent* recv = flow_ends[id][0];
    EXPECT_EQ(send->name, "send");
    EXPECT_EQ(recv->name, "recv-done");
    EXPECT_EQ(send->category, "send");
    const int src = std::stoi(send->annotations.at("src_core")), dst = std::stoi(send->annotations.at("dst_core"));
    EXPECT_EQ(recv->annotations.at("src_core"), std::to_string(src));
    EXPECT_EQ(process_of(send), "host" + std::to_string(src) + " /device:CUSTOM:" + std::to_string(src));
    EXPECT_EQ(process_of(recv), "host" + std::to_string(dst) + " /device:CUSTOM:" + std::to_string(dst));
    // On merged clocks the recv-done starts 2 µs after its send, whatever the hosts' offsets.
    EXPECT_EQ(recv->timestamp - send->timestamp, 2'000u);
  }

  // Merged clocks: each step starts at the same coordinator time on every rank.
  std::map<std::string, std::set<uint64_t>> step_starts;
  for (const auto& e : trace.events) {
    if (e.type == 1 && e.category == "step") step_starts[e.annotations.at("step_num")].insert(e.timestamp);
  }
  ASSERT_EQ(step_starts.size(), static_cast<size_t>(spec.steps));
  for (const auto& [step, starts] : step_starts) EXPECT_EQ(starts.size(), 1u) << "step " << step;

  // The straggler's long compute and the others' all-reduce waits on one timeline: every other rank enters
  // each all-reduce (and waits) the straggler delay before rank 2 does.
  std::map<std::string, std::map<std::string, uint64_t>> all_reduce_begin;  // step -> process -> time
  for (const auto& e : trace.events) {
    if (e.type == 1 && e.name == "all-reduce") {
      all_reduce_begin[e.annotations.at("step_num")][process_of(&e)] = e.timestamp;
    }
  }
  ASSERT_EQ(all_reduce_begin.size(), static_cast<size_t>(spec.steps));
  for (auto& [step, begins] : all_reduce_begin) {
    const uint64_t straggler = begins.at("host2 /device:CUSTOM:2");
    for (const auto& [process, begin] : begins) {
      if (process == "host2 /device:CUSTOM:2") continue;
      EXPECT_EQ(straggler - begin, 4'000'000u) << process << " step " << step;
    }
  }

  const std::string command = "protoc --decode_raw < " + files->perfetto + " > /dev/null";
  EXPECT_EQ(std::system(command.c_str()), 0) << "protoc --decode_raw rejects the file";
}

TEST(PodTrace, OverlappingEventsThatDoNotNestGetAnOverflowTrack) {
  const podscope::testing::ScratchDirectory scratch("pod_trace_overlap");
  const fs::path& dir = scratch.path();
  tensorflow::profiler::XSpace space;
  xspace::XPlaneBuilder plane(xspace::find_or_add_plane(space, "/device:CUSTOM:0", 0));
  auto line = plane.line(1, "Ops");
  const int64_t t = 1'700'000'000'000'000'000;
  line.add_event("a", t, 100);
  line.add_event("b", t + 50, 100);  // overlaps a without nesting in it
  line.add_event("c", t + 120, 10);  // nests in b only
  line.add_event("d", t + 200, 10);  // nests in nothing
  {
    std::ofstream out(dir / "h.xplane.pb", std::ios::binary);
    space.SerializeToOstream(&out);
  }
  auto files = write_run_traces(dir, TraceSelection{});
  ASSERT_TRUE(files.ok()) << files.status();
  const DecodedTrace trace = testing::read_perfetto_trace(files->perfetto);
  std::map<std::string, std::string> track_of;
  for (const auto& e : trace.events) {
    if (e.type == 1) track_of[e.name] = trace.tracks.at(e.track_uuid).name;
  }
  EXPECT_EQ(track_of["a"], "Ops");
  EXPECT_EQ(track_of["b"], "Ops (overlap 2)");
  EXPECT_EQ(track_of["c"], "Ops (overlap 2)");
  EXPECT_EQ(track_of["d"], "Ops");
  EXPECT_TRUE(unbalanced_tracks(trace).empty());
}

// An X event of the JSON trace: ts and dur as a reader parses them (doubles), and exactly (ns).
struct JsonSlice {
  std::string name;
  double ts_us, dur_us;
  int64_t ts_ns, dur_ns;
};

std::vector<JsonSlice> json_slices(const std::string& json) {
  std::vector<JsonSlice> out;
  const std::regex x_event(
      R"re("ph":"X","pid":\d+,"tid":\d+,"name":"([^"]*)","ts":(-?\d+)\.(\d+),"dur":(\d+)\.(\d+))re");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), x_event); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    const std::string ts = m[2].str() + "." + m[3].str(), dur = m[4].str() + "." + m[5].str();
    out.push_back({m[1], std::strtod(ts.c_str(), nullptr), std::strtod(dur.c_str(), nullptr),
                   std::stoll(m[2]) * 1000 + std::stoll(m[3]), std::stoll(m[4]) * 1000 + std::stoll(m[5])});
  }
  return out;
}

TEST(PodTrace, JsonTimesAreRelativeToARecordedBaseSoEveryNestedSliceNests) {
  const podscope::testing::ScratchDirectory scratch("pod_trace_json");
  const fs::path& dir = scratch.path();
  // Parents with children that end 1 ns before them, at Unix-epoch times where an absolute µs double
  // is only good to 0.25 µs.
  tensorflow::profiler::XSpace space;
  xspace::XPlaneBuilder plane(xspace::find_or_add_plane(space, "/device:CUSTOM:0", 0));
  xspace::XPlaneBuilder host(xspace::find_or_add_plane(space, xspace::kHostPlaneName));
  const int64_t base = 1'700'000'000'123'456'789;
  host.stats().add(xspace::kCaptureStartStat, base);
  auto line = plane.line(1, "Ops");
  std::mt19937_64 random(7);
  std::vector<std::pair<int64_t, int64_t>> parents;
  int64_t t = base + 1000;
  for (int i = 0; i < 2000; ++i) {
    const int64_t duration = 2 + static_cast<int64_t>(random() % 5000);
    line.add_event("parent", t, duration);
    line.add_event("child", t + 1, duration - 2);
    t += duration + static_cast<int64_t>(random() % 3);
  }
  {
    std::ofstream out(dir / "h.xplane.pb", std::ios::binary);
    space.SerializeToOstream(&out);
  }
  auto files = write_run_traces(dir, TraceSelection{});
  ASSERT_TRUE(files.ok()) << files.status();
  const std::string json = gunzip_file(files->json);
  EXPECT_NE(json.find("\"otherData\":{\"clock\":\"coordinator\",\"time_base_ns\":" + std::to_string(base) + "}"),
            std::string::npos);
  EXPECT_NE(json.find("\"displayTimeUnit\":\"ns\""), std::string::npos);
  const auto slices = json_slices(json);
  ASSERT_EQ(slices.size(), 4000u);
  int not_nested = 0;
  for (size_t i = 0; i + 1 < slices.size(); i += 2) {
    const JsonSlice& parent = slices[i];
    const JsonSlice& child = slices[i + 1];
    ASSERT_EQ(parent.name, "parent");
    EXPECT_EQ(child.ts_ns, parent.ts_ns + 1);
    if (child.ts_us < parent.ts_us || child.ts_us + child.dur_us > parent.ts_us + parent.dur_us) ++not_nested;
  }
  EXPECT_EQ(not_nested, 0);
  EXPECT_EQ(slices[0].ts_ns, 1000) << "relative to the capture start";
}

TEST(PodTrace, StepWindowWritesOnlyThatStepsEvents) {
  const podscope::testing::ScratchDirectory scratch("pod_trace_window");
  const fs::path& dir = scratch.path();
  const SyntheticPodSpec spec = four_rank_spec();
  const InputCounts input = write_run(dir, spec);
  auto selection = parse_trace_selection("step:1");
  ASSERT_TRUE(selection.ok()) << selection.status();
  auto files = write_run_traces(dir, *selection);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->perfetto, dir / "pod.step1.perfetto-trace");
  EXPECT_TRUE(fs::exists(dir / "pod.step1.trace.json.gz"));
  const DecodedTrace trace = testing::read_perfetto_trace(files->perfetto);
  std::set<std::string> steps;
  uint64_t slices = 0;
  for (const auto& e : trace.events) {
    if (e.type == 1) ++slices;
    if (e.type == 1 && e.category == "step") steps.insert(e.annotations.at("step_num"));
  }
  EXPECT_EQ(steps, (std::set<std::string>{"1"}));
  EXPECT_GT(slices, 0u);
  EXPECT_LT(slices, input.slices / 2);
  EXPECT_TRUE(unbalanced_tracks(trace).empty());

  auto ms = parse_trace_selection("0:0.5");
  ASSERT_TRUE(ms.ok());
  auto ms_files = write_run_traces(dir, *ms);
  ASSERT_TRUE(ms_files.ok()) << ms_files.status();
  EXPECT_EQ(ms_files->perfetto, dir / "pod.0-0.5ms.perfetto-trace");
  EXPECT_GT(ms_files->counts.slices, 0u);
  EXPECT_LT(ms_files->counts.slices, files->counts.slices);

  EXPECT_FALSE(write_run_traces(dir, *parse_trace_selection("step:99")).ok());
}

// The TensorFlow file numbers its one step by `group_id` (no `step_num`, no recorded capture start): step:N
// finds it as the analysis does (its first core's start to its last core's end), and A:B counts from the file's
// first event.
TEST(PodTrace, TraceWindowsWorkOnTheTensorFlowFile) {
  const auto tf_file = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!tf_file) return;
  const podscope::testing::ScratchDirectory scratch("pod_trace_tf_window");
  const fs::path& dir = scratch.path();
  fs::copy_file(*tf_file, dir / tf_file->filename());
  const tensorflow::profiler::XSpace space = podscope::testing::read_xspace_file(*tf_file);
  analysis::FileStepSpans reader;
  for (const auto& plane : space.planes()) reader.add_plane(plane);
  const auto found = std::move(reader).finish();
  int64_t step_start = std::numeric_limits<int64_t>::max(), step_end = 0;
  for (const auto& plane : found.planes) {
    for (const auto& step : plane.steps) {
      if (step.step_num != 0) continue;
      step_start = std::min(step_start, step.start_ns);
      step_end = std::max(step_end, step.end_ns);
    }
  }
  ASSERT_LT(step_start, step_end) << "the analysis' step 0";

  auto step_files = write_run_traces(dir, *parse_trace_selection("step:0"));
  ASSERT_TRUE(step_files.ok()) << step_files.status();
  EXPECT_EQ(step_files->perfetto, dir / "pod.step0.perfetto-trace");
  const std::string json = gunzip_file(step_files->json);
  EXPECT_NE(json.find("\"time_base_ns\":" + std::to_string(step_start) + "}"), std::string::npos);
  EXPECT_GT(step_files->counts.slices, 0u);

  auto ms_files = write_run_traces(dir, *parse_trace_selection("0:5"));
  ASSERT_TRUE(ms_files.ok()) << ms_files.status();
  EXPECT_EQ(ms_files->perfetto, dir / "pod.0-5ms.perfetto-trace");
  EXPECT_GT(ms_files->counts.slices, 0u);
  auto whole = write_run_traces(dir, TraceSelection{});
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_LT(ms_files->counts.slices, whole->counts.slices);
  EXPECT_LT(step_files->counts.slices, whole->counts.slices);

  const auto missing = write_run_traces(dir, *parse_trace_selection("step:1"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("step 1"), std::string::npos) << missing.status();
}

TEST(PodTrace, TraceWindowTextIsMillisecondsOrAStep) {
  EXPECT_EQ(parse_trace_selection("step:7")->step_num, 7);
  EXPECT_EQ(parse_trace_selection("10:250.5")->to_ms, 250.5);
  for (const char* bad : {"", "12", "5:5", "9:3", "-1:3", "a:b", "step:", "step:x"}) {
    const auto parsed = parse_trace_selection(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find(bad), std::string::npos) << parsed.status();
    }
  }
}

}  // namespace
}  // namespace podscope::trace_writers
