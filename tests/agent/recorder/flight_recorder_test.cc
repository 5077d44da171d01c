// The flight recorder without sockets: recording starts once and stops once; while off, every kind of snapshot is
// refused naming why; a span is checked before anything is built; a longer ask is cut to the window and the snapshot
// says so; snapshots since the last follow one another; snapshots are built one at a time; its gauges and counters
// follow it; and its lifecycle component records from the start when configured to and stops at shutdown.
#include "agent/recorder/flight_recorder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "agent/recorder/flight_recorder_component.h"
#include "tensorflow/xplane.pb.h"
#include "tests/agent/recorder/recorder_parts.h"

namespace podscope::agent {
namespace {

using ::testing::HasSubstr;
using testing::RecorderParts;

constexpr int64_t kSecond = 1'000'000'000;

FlightRecorderSettings window_of(int64_t seconds) { return FlightRecorderSettings{seconds * kSecond, size_t{8} << 20}; }

TEST(FlightRecorder, StartsOnceAndStopsOnce) {
  RecorderParts parts;
  EXPECT_FALSE(parts.recorder.state().has_value());
  ASSERT_TRUE(parts.recorder.start(window_of(30)).ok());
  const absl::Status again = parts.recorder.start(window_of(5));
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  EXPECT_THAT(again.message(), HasSubstr("window 30 s"));
  ASSERT_TRUE(parts.recorder.state().has_value());
  EXPECT_EQ(parts.recorder.state()->window_ns, 30 * kSecond) << "the second start changed nothing";

  ASSERT_TRUE(parts.recorder.stop().ok());
  EXPECT_FALSE(parts.recorder.state().has_value());
  EXPECT_TRUE(absl::IsNotFound(parts.recorder.stop()));
}

TEST(FlightRecorder, OffEverySnapshotIsRefusedNamingWhy) {
  RecorderParts parts;
  const auto last = parts.recorder.last(1000);
  EXPECT_TRUE(absl::IsFailedPrecondition(last.status())) << last.status();
  EXPECT_THAT(last.status().message(), HasSubstr("flight_recorder_seconds"));
  const int64_t now = parts.clock.now_ns();
  const auto span = parts.recorder.span(now - kSecond, now, WhenBuilding::kQueue);
  EXPECT_TRUE(absl::IsFailedPrecondition(span.status())) << span.status();
  EXPECT_THAT(span.status().message(), HasSubstr("flight_recorder_seconds"));
  EXPECT_TRUE(absl::IsNotFound(parts.recorder.snapshot_since_last(WhenBuilding::kQueue).status()));
}

TEST(FlightRecorder, EmptyOrOutsideSpansAreRefusedBeforeAnythingIsBuilt) {
  RecorderParts parts;
  ASSERT_TRUE(parts.recorder.start(window_of(1)).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(parts.recorder.last(0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(parts.recorder.last(-5).status()));
  const int64_t now = parts.clock.now_ns();
  EXPECT_TRUE(absl::IsInvalidArgument(parts.recorder.span(now, now, WhenBuilding::kQueue).status()));
  const auto before_the_window = parts.recorder.span(now - 10 * kSecond, now - 5 * kSecond, WhenBuilding::kQueue);
  EXPECT_TRUE(absl::IsOutOfRange(before_the_window.status())) << before_the_window.status();
  EXPECT_THAT(before_the_window.status().message(), HasSubstr("holds 1000 ms"));
  EXPECT_THAT(parts.metrics_text(), HasSubstr("podscope_flight_recorder_snapshots_total{host=\"h\"} 0\n"));
}

TEST(FlightRecorder, ALongerAskIsCutToTheWindowAndTheSnapshotSaysSo) {
  RecorderParts parts;
  ASSERT_TRUE(parts.recorder.start(window_of(1)).ok());
  const auto snapshot = parts.recorder.last(5000);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->end_ns - snapshot->begin_ns, kSecond);
  EXPECT_EQ(snapshot->end_ns - snapshot->asked_begin_ns, 5 * kSecond);
  EXPECT_EQ(snapshot->whole_since_ns, snapshot->begin_ns);
  EXPECT_FALSE(snapshot->has_events) << "no client recorded anything";
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(snapshot->xspace));
  std::string warnings;
  for (const std::string& w : space.warnings()) warnings += w + "\n";
  EXPECT_THAT(warnings,
              HasSubstr("holds 1.000 s of the 5.000 s asked; its window (flight_recorder_seconds) is 1000 ms"));
  EXPECT_THAT(warnings, HasSubstr("cannot look back"));
}

TEST(FlightRecorder, EachSnapshotSinceTheLastBeginsWhereThePreviousEnded) {
  RecorderParts parts;
  const int64_t started = parts.clock.now_ns();
  ASSERT_TRUE(parts.recorder.start(window_of(30)).ok());
  int64_t first_end = 0;
  {
    const auto first = parts.recorder.snapshot_since_last(WhenBuilding::kQueue);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_GE(first->begin_ns, started) << "since recording started";
    first_end = first->end_ns;
  }
  const auto second = parts.recorder.snapshot_since_last(WhenBuilding::kQueue);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->asked_begin_ns, first_end);
  EXPECT_EQ(second->begin_ns, first_end);
  EXPECT_GE(second->end_ns, first_end);
}

TEST(FlightRecorder, SnapshotsAreBuiltOneAtATime) {
  RecorderParts parts;
  ASSERT_TRUE(parts.recorder.start(window_of(30)).ok());
  auto held = std::make_optional(parts.recorder.last(1000));
  ASSERT_TRUE(held->ok()) << held->status();
  auto waiting = std::async(std::launch::async, [&parts] { return parts.recorder.last(1000, WhenBuilding::kWait); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "built while another snapshot held the build slot";
  held.reset();
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_TRUE(waiting.get().ok());
  EXPECT_THAT(parts.metrics_text(), HasSubstr("podscope_flight_recorder_snapshots_total{host=\"h\"} 2\n"));
}

TEST(FlightRecorder, ItsGaugesFollowItOnAndOff) {
  RecorderParts parts;
  ASSERT_TRUE(parts.recorder.start(window_of(30)).ok());
  parts.recorder.publish_metrics();
  EXPECT_THAT(parts.metrics_text(), HasSubstr("podscope_flight_recorder_window_seconds{host=\"h\"} 30\n"));
  ASSERT_TRUE(parts.recorder.stop().ok());
  const std::string off = parts.metrics_text();
  EXPECT_THAT(off, HasSubstr("podscope_flight_recorder_window_seconds{host=\"h\"} 0\n"));
  EXPECT_THAT(off, HasSubstr("podscope_flight_recorder_held_bytes{host=\"h\"} 0\n"));
}

TEST(FlightRecorderComponent, RecordsFromTheStartWhenConfiguredAndStopsAtShutdown) {
  RecorderParts parts;
  {
    FlightRecorderComponent component(parts.recorder, window_of(10));
    ASSERT_TRUE(component.start().ok());
    ASSERT_TRUE(parts.recorder.state().has_value());
    EXPECT_EQ(parts.recorder.state()->window_ns, 10 * kSecond);
    component.stop();
    EXPECT_FALSE(parts.recorder.state().has_value());
  }
  FlightRecorderComponent off_until_asked(parts.recorder, std::nullopt);
  ASSERT_TRUE(off_until_asked.start().ok());
  EXPECT_FALSE(parts.recorder.state().has_value()) << "off until StartContinuousProfiling";
  ASSERT_TRUE(parts.recorder.start(window_of(5)).ok());  // what StartContinuousProfiling does
  off_until_asked.stop();
  EXPECT_FALSE(parts.recorder.state().has_value()) << "a shutdown stops a recording however it was started";
}

TEST(FlightRecorderComponent, ARecorderAlreadyRecordingFailsItsStart) {
  RecorderParts parts;
  ASSERT_TRUE(parts.recorder.start(window_of(5)).ok());
  FlightRecorderComponent component(parts.recorder, window_of(10));
  EXPECT_TRUE(absl::IsAlreadyExists(component.start()));
}

}  // namespace
}  // namespace podscope::agent
