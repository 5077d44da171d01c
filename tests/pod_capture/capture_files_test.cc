// The run's files from a capture's answers: each host's file is its answer with its clock stamped, the same answers
// give the same bytes; capture.json and the capture summary: what each host's capture memory budget dropped, per
// core, and max_events recorded as sent and not applied.
#include "pod_capture/capture_files.h"

#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"
#include "tests/scratch_directory.h"

namespace podscope::pod_capture {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// An agent's answer: a host plane and a device plane with events of many names (so the planes' metadata maps hold
// more entries than a hash table keeps in one order) and a stale clock stat the writing replaces.
tensorflow::profiler::XSpace answer_space() {
  tensorflow::profiler::XSpace space;
  space.add_hostnames("worker-7");
  for (std::string_view name : {xspace::kHostPlaneName, std::string_view("/device:CUSTOM:0")}) {
    xspace::XPlaneBuilder plane(xspace::find_or_add_plane(space, name));
    plane.stats().add(xspace::kClockOffsetStat, int64_t{999});
    auto line = plane.line(1, "Steps");
    for (int i = 0; i < 64; ++i) {
      line.add_event("op" + std::to_string(i), 1'000'000 + i * 1000, 500).add("step_num", int64_t{i});
    }
  }
  return space;
}

HostCapture host_answering(const std::string& bytes, int index) {
  HostCapture host;
  host.address = "10.0.0." + std::to_string(index) + ":8466";
  host.file_stem = host_file_stem(host.address);
  host.host_name = "worker-7";
  host.ok = true;
  host.xspace = bytes;
  host.clock.kind = ClockMeasurement::kMeasured;
  host.clock.estimate.offset_ns = 1'000'000 * (index + 1);
  host.clock.estimate.rtt_ns = 40'000 + index;
  host.clock_drift_ppm = 0.5 * index;
  return host;
}

// The plane as its answer had it: without the clock stats and their metadata.
tensorflow::profiler::XPlane without_clock_stats(tensorflow::profiler::XPlane plane) {
  for (std::string_view name : {xspace::kClockOffsetStat, xspace::kClockRttStat, xspace::kClockDriftStat}) {
    const std::optional<int64_t> id = xspace::XPlaneReader(plane).stat_id(name);
    if (!id) continue;
    auto* stats = plane.mutable_stats();
    for (int i = stats->size() - 1; i >= 0; --i) {
      if (stats->Get(i).metadata_id() == *id) stats->DeleteSubrange(i, 1);
    }
    plane.mutable_stat_metadata()->erase(*id);
  }
  return plane;
}

TEST(CaptureFiles, AHostFileIsItsAnswerWithItsClockOnEveryPlaneAndTheSameAnswersGiveTheSameBytes) {
  const tensorflow::profiler::XSpace answer = answer_space();
  const std::string bytes = answer.SerializeAsString();
  CaptureResult result;
  result.session_id = "run";
  result.start_ns = 1'000'000;
  for (int i = 0; i < 2; ++i) result.hosts.push_back(host_answering(bytes, i));
  CaptureResult again = result;
  const podscope::testing::ScratchDirectory scratch("capture_files_same_bytes");
  const std::filesystem::path& base = scratch.path();
  ASSERT_TRUE(write_run_files(base / "first", result).ok());
  ASSERT_TRUE(write_run_files(base / "second", again).ok());

  for (const HostCapture& host : result.hosts) {
    EXPECT_TRUE(host.xspace.empty()) << "a written host's answer is released";
    const std::string file = read_file(base / "first" / (host.file_stem + ".xplane.pb"));
    EXPECT_EQ(file, read_file(base / "second" / (host.file_stem + ".xplane.pb"))) << host.file_stem;
    tensorflow::profiler::XSpace written;
    ASSERT_TRUE(written.ParseFromString(file));
    ASSERT_EQ(written.planes_size(), answer.planes_size());
    EXPECT_EQ(written.hostnames(0), "worker-7");
    for (int p = 0; p < written.planes_size(); ++p) {
      const xspace::XPlaneReader plane(written.planes(p));
      EXPECT_EQ(plane.int_stat(xspace::kClockOffsetStat), host.clock.estimate.offset_ns);
      EXPECT_EQ(plane.int_stat(xspace::kClockRttStat), host.clock.estimate.rtt_ns);
      EXPECT_EQ(plane.double_stat(xspace::kClockDriftStat), host.clock_drift_ppm);
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(without_clock_stats(written.planes(p)),
                                                                     without_clock_stats(answer.planes(p))))
          << written.planes(p).name();
    }
  }
  for (const char* name : {"capture.json", "pod.perfetto-trace", "pod.trace.json.gz"}) {
    EXPECT_FALSE(read_file(base / "first" / name).empty()) << name;
    EXPECT_EQ(read_file(base / "first" / name), read_file(base / "second" / name)) << name;
  }
}

TEST(CaptureFiles, BudgetDropsPerCoreAndUnappliedMaxEventsAreInCaptureJsonAndTheSummary) {
  CaptureResult result;
  result.session_id = "run";
  HostCapture host;
  host.ok = true;
  host.file_stem = "host0";
  tensorflow::profiler::XSpace space;
  xspace::XPlaneBuilder(xspace::find_or_add_plane(space, "/device:CUSTOM:2", 2))
      .stats()
      .add(xspace::kClientPidStat, int64_t{4242})
      .add(xspace::kDroppedEventsStat, int64_t{1234})
      .add(xspace::kDroppedStepsStat, int64_t{56});
  xspace::find_or_add_plane(space, "/device:CUSTOM:3", 3);  // nothing dropped there
  host.budget_drops = budget_drops_of(space);
  result.hosts.push_back(std::move(host));

  const std::string json = capture_json(result);
  EXPECT_NE(json.find(R"("budget_drops": [{"core": 2, "pid": 4242, "events": 1234, "steps": 56}])"), std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("max_events_requested": 1000000)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("max_events_applied": false)"), std::string::npos) << json;
  const std::string summary = capture_summary_text(result, "");
  EXPECT_NE(summary.find("capture_memory_limit_mb dropped 1234 events in 56 whole steps"), std::string::npos)
      << summary;
}

TEST(CaptureFiles, CaptureJsonTimesTheFanOutsPhases) {
  CaptureResult result;
  result.session_id = "run";
  result.sync_begin_ns = 1'000'000'000;
  result.synced_ns = 1'300'000'000;    // a 300 ms opening burst
  result.issued_ns = 1'350'000'000;    // every call out 50 ms later
  result.start_ns = 1'578'000'000;     // 228 ms ahead of the start
  result.gathered_ns = 3'000'000'000;  // the last answer in
  result.second_burst = {4, true};
  std::string json = capture_json(result);
  for (const char* field :
       {R"("collected_in_ms": 2000)", R"("clock_sync_in_ms": 300)", R"("issued_in_ms": 50)",
        R"("issued_ahead_of_start_ms": 228)", R"("second_clock_burst": {"largest_window": 4, "fell_behind": true})"}) {
    EXPECT_NE(json.find(field), std::string::npos) << field << "\n" << json;
  }
  // A window of the past starts before its calls: no issuing lead to speak of.
  result.last_ms = 2000;
  json = capture_json(result);
  EXPECT_EQ(json.find("issued_ahead_of_start_ms"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("clock_sync_in_ms": 300)"), std::string::npos) << json;
}

}  // namespace
}  // namespace podscope::pod_capture
