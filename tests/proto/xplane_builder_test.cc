#include "proto/xspace/xplane_builder.h"

#include <gtest/gtest.h>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

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

}  // namespace
}  // namespace podscope::xspace
