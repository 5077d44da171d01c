#include "proto/xspace/xplane_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/shared_testdata.h"

namespace podscope::xspace {
namespace {

TEST(XPlaneReader, ReadsTensorFlowsOwnXSpace) {
  const auto tf_file = testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!tf_file) return;
  std::ifstream in(*tf_file, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(bytes.str()));

  const tensorflow::profiler::XPlane* host = nullptr;
  int gpu_planes = 0;
  for (const auto& p : space.planes()) {
    if (p.name() == kHostPlaneName) host = &p;
    if (p.name().rfind(kGpuPlanePrefix, 0) == 0) ++gpu_planes;
  }
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(gpu_planes, 8);

  int64_t steps = 0;
  for (const auto& p : space.planes()) {
    XPlaneReader reader(p);
    const auto* line = reader.find_line(kStepsLineName);
    if (line == nullptr) continue;
    reader.for_each_event(*line, [&](const XEventView& e) {
      EXPECT_FALSE(e.name().empty());
      EXPECT_GT(e.duration_ps(), 0);
      ++steps;
    });
  }
  EXPECT_GT(steps, 0);
}

TEST(HasEvents, OnlyAnEventOnSomeLineCounts) {
  tensorflow::profiler::XSpace space;
  EXPECT_FALSE(has_events(space));
  XPlaneBuilder host(find_or_add_plane(space, kHostPlaneName));
  host.stats().add(kCaptureStartStat, int64_t{1});
  host.line_named("Steps");
  EXPECT_FALSE(has_events(space)) << "planes, stats and empty lines are no trace";
  XPlaneBuilder(find_or_add_plane(space, "/device:CUSTOM:0")).line_named("Steps").add_event("step", 1000, 10);
  EXPECT_TRUE(has_events(space));
}

}  // namespace
}  // namespace podscope::xspace
