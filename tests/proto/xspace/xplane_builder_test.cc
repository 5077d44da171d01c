#include "proto/xspace/xplane_builder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>

#include "google/protobuf/util/message_differencer.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace podscope::xspace {
namespace {

TEST(XPlaneBuilder, EventsKeepUnixNanosecondsThroughPicosecondOffsets) {
  XSpace space;
  XPlaneBuilder plane(find_or_add_plane(space, kHostPlaneName));
  XLineBuilder line = plane.line(7, "worker");
  line.add_event("compute", 1'700'000'000'000'000'500, 250).add(kStepNumStat, int64_t{3});

  ASSERT_EQ(space.planes_size(), 1);
  const XLine& l = space.planes(0).lines(0);
  EXPECT_EQ(l.timestamp_ns(), 1'700'000'000'000'000'500);
  XPlaneReader reader(space.planes(0));
  int seen = 0;
  reader.for_each_event(l, [&](const XEventView& e) {
    EXPECT_EQ(e.name(), "compute");
    EXPECT_EQ(e.start_ns(), 1'700'000'000'000'000'500);
    EXPECT_EQ(e.duration_ns(), 250);
    EXPECT_EQ(e.int_stat(kStepNumStat), 3);
    ++seen;
  });
  EXPECT_EQ(seen, 1);
}

TEST(XPlaneBuilder, EarlierEventRebasesTheLine) {
  XSpace space;
  XPlaneBuilder plane(find_or_add_plane(space, kHostPlaneName));
  XLineBuilder line = plane.line(1, "t");
  line.add_event("late", 2000, 10);
  line.add_event("early", 1000, 10);
  XPlaneReader reader(space.planes(0));
  std::vector<std::pair<std::string, int64_t>> got;
  reader.for_each_event(space.planes(0).lines(0),
                        [&](const XEventView& e) { got.emplace_back(std::string(e.name()), e.start_ns()); });
  EXPECT_EQ(space.planes(0).lines(0).timestamp_ns(), 1000);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, int64_t>>{{"late", 2000}, {"early", 1000}}));
}

TEST(XPlaneBuilder, MetadataIsSharedByName) {
  XSpace space;
  XPlaneBuilder plane(find_or_add_plane(space, kHostPlaneName));
  EXPECT_EQ(plane.event_metadata_id("a"), plane.event_metadata_id("a"));
  EXPECT_NE(plane.event_metadata_id("a"), plane.event_metadata_id("b"));
  EXPECT_EQ(plane.stat_metadata_id("x"), plane.stat_metadata_id("x"));
  EXPECT_EQ(space.planes(0).event_metadata_size(), 2);
}

// A named line takes the id after the highest; where that is past int64's range (a trace's hostile thread id), the
// lowest id not taken.
TEST(XPlaneBuilder, NamedLinesTakeIdsNoLineHas) {
  XSpace space;
  XPlaneBuilder plane(find_or_add_plane(space, kHostPlaneName));
  plane.line(7, "thread 7");
  EXPECT_EQ(plane.line_named("a").proto()->id(), 8);
  plane.line(INT64_MAX, "thread max");
  plane.line(0, "thread 0");
  EXPECT_EQ(plane.line_named("b").proto()->id(), 1);
  EXPECT_EQ(plane.line_named("c").proto()->id(), 2);
  EXPECT_EQ(plane.line_named("a").proto()->id(), 8);
}

TEST(XPlaneBuilder, CountersLandOnTheCountersLineWithAValueStat) {
  XSpace space;
  XPlaneBuilder plane(find_or_add_plane(space, kHostPlaneName));
  plane.line_named(kCountersLineName).add_counter("cpu0 utilization", 5000, 0.25);
  XPlaneReader reader(space.planes(0));
  const XLine* counters = reader.find_line(kCountersLineName);
  ASSERT_NE(counters, nullptr);
  reader.for_each_event(*counters, [&](const XEventView& e) {
    EXPECT_EQ(e.name(), "cpu0 utilization");
    EXPECT_DOUBLE_EQ(*e.double_stat(kCounterValueStat), 0.25);
  });
}

// Builds a plane of three lines (one holding no events, one stamped 0) and per-plane stats, `events` events by
// start; `after_each` runs after every event.
void build_plane(XPlane& plane, int events, const std::function<void()>& after_each) {
  plane.set_name("/device:CUSTOM:3");
  plane.set_id(3);
  XPlaneBuilder builder(&plane);
  builder.stats().add(kDroppedEventsStat, int64_t{5});
  builder.line_named("empty");
  XLineBuilder zero = builder.line(9, "stamped zero");
  for (int i = 0; i < events; ++i) {
    const int64_t start = 1'700'000'000'000'000'000 + 1000 * i;
    builder.line(i % 3 == 0 ? 1 : 2, i % 3 == 0 ? "Steps" : "Thread 2")
        .add_event(i % 3 == 0 ? "train" : "op " + std::to_string(i % 7), start, 900)
        .add(kStepNumStat, int64_t{i / 3})
        .add(kBytesStat, int64_t{i});
    if (i % 50 == 0) zero.add_event("at zero", 1000 * i, 10);
    after_each();
  }
}

TEST(XPlaneStreamWriter, WritesTheSamePlaneAsAWholeSerialization) {
  XSpace whole;
  build_plane(*whole.add_planes(), 1000, [] {});
  XPlane plane;
  XPlaneStreamWriter writer(plane);
  int added = 0;
  build_plane(plane, 1000, [&] {
    if (++added % 97 == 0) writer.flush_events();
  });
  std::string bytes;
  writer.finish(bytes);
  EXPECT_EQ(plane.ByteSizeLong(), 0u) << "the plane is left empty";
  XSpace streamed;
  ASSERT_TRUE(streamed.ParseFromString(bytes));
  ASSERT_EQ(streamed.planes_size(), 1);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(streamed.planes(0), whole.planes(0)));
  // The lines as protobuf writes them: a line's name comes before its events, so a reader's line filter works.
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("podscope_streamed_" + std::to_string(::getpid()) + ".xplane.pb");
  std::ofstream(path, std::ios::binary) << bytes;
  std::vector<int> events_per_line;
  ASSERT_TRUE(read_xspace_planes(
                  path,
                  [&](const XPlane& p) {
                    for (const XLine& l : p.lines()) events_per_line.push_back(l.events_size());
                    return absl::OkStatus();
                  },
                  nullptr, [](std::string_view, std::string_view line) { return line != "Thread 2"; })
                  .ok());
  std::filesystem::remove(path);
  EXPECT_EQ(events_per_line, (std::vector<int>{0, 20, 334})) << "empty, stamped zero, Steps; Thread 2 left out";
}

TEST(MergeSpace, SamePlaneNamesMergeWithRemappedMetadata) {
  XSpace ours;
  XPlaneBuilder host(find_or_add_plane(ours, kHostPlaneName));
  host.line(1, "ours").add_event("sample", 100, 1).add(kBytesStat, int64_t{8});

  XSpace theirs;
  XPlaneBuilder their_host(find_or_add_plane(theirs, kHostPlaneName));
  their_host.event_metadata_id("filler");  // shifts their ids so they collide with ours
  their_host.line(1, "theirs").add_event("op", 200, 5).add(kStepNumStat, int64_t{9});
  XPlaneBuilder gpu(find_or_add_plane(theirs, "/device:GPU:0"));
  gpu.line(0, "Stream #1(Compute)").add_event("kernel", 300, 2);
  theirs.add_warnings("upstream warning");

  merge_space(std::move(theirs), ours);
  ASSERT_EQ(ours.planes_size(), 2);
  EXPECT_EQ(ours.warnings(0), "upstream warning");
  const XPlane& merged = ours.planes(0);
  ASSERT_EQ(merged.lines_size(), 2);
  EXPECT_NE(merged.lines(0).id(), merged.lines(1).id());
  XPlaneReader reader(merged);
  std::vector<std::string> names;
  for (const XLine& l : merged.lines()) {
    reader.for_each_event(l, [&](const XEventView& e) { names.emplace_back(e.name()); });
  }
  EXPECT_EQ(names, (std::vector<std::string>{"sample", "op"}));
  reader.for_each_event(merged.lines(1), [&](const XEventView& e) { EXPECT_EQ(e.int_stat(kStepNumStat), 9); });
}

TEST(MergeSpace, DevicePlanesTwoProcessesNumberAlikeGetFreeOrdinals) {
  XSpace capture;
  find_or_add_plane(capture, kHostPlaneName);
  find_or_add_plane(capture, "/device:GPU:0", 0);
  find_or_add_plane(capture, "/device:GPU:2", 2);
  XSpace process;
  find_or_add_plane(process, kHostPlaneName);
  find_or_add_plane(process, "/device:GPU:0", 0);
  find_or_add_plane(process, "/device:GPU:1", 1);
  find_or_add_plane(process, "/device:GPU:2", 2);
  find_or_add_plane(process, "/device:TPU:0", 0);

  const auto renamed = renumber_taken_device_planes(process, capture);
  // GPU 1 is the process's own and stays; the TPU and the host plane are not taken.
  EXPECT_EQ(renamed, (std::vector<std::pair<std::string, std::string>>{{"/device:GPU:0", "/device:GPU:3"},
                                                                       {"/device:GPU:2", "/device:GPU:4"}}));
  EXPECT_EQ(process.planes(1).name(), "/device:GPU:3");
  EXPECT_EQ(process.planes(1).id(), 3);
  EXPECT_EQ(process.planes(3).id(), 4);
  merge_space(std::move(process), capture);
  EXPECT_EQ(capture.planes_size(), 7) << "one host plane, five GPUs, one TPU";
}

}  // namespace
}  // namespace podscope::xspace
