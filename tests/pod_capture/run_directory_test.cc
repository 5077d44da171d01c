// capture.json and the capture summary: what each host's capture memory budget dropped, per core, and max_events
// recorded as sent and not applied.
#include "pod_capture/run_directory.h"

#include <gtest/gtest.h>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::pod_capture {
namespace {

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
