#include "proto/xspace/xplane_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/proto/wire_fields.h"
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

// Protobuf wire format, written from the field numbers of TensorFlow's xplane.proto.
using testing::bytes_field;
using testing::varint_field;

std::string gzip(const std::string& text) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&stream, text.size()) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

TEST(XPlaneReader, ReadsCompressedStringStatsOnPlanesEventsAndEventMetadata) {
  const std::string hlo = "HloModule m\n" + std::string(4000, 'x');
  // XStat{metadata_id = 1 (stat "hlo_text"), compressed_str_value = 8}.
  const std::string stat = varint_field(1, 1) + bytes_field(8, gzip(hlo));
  const std::string stat_metadata_entry =
      varint_field(1, 1) + bytes_field(2, varint_field(1, 1) + bytes_field(2, "hlo_text"));
  // XEventMetadata{id = 1, name = "fusion", stats = 5: the stat}; an XLine whose event carries the stat too.
  const std::string event_metadata_entry =
      varint_field(1, 1) + bytes_field(2, varint_field(1, 1) + bytes_field(2, "fusion") + bytes_field(5, stat));
  const std::string event = varint_field(1, 1) + varint_field(2, 1000) + varint_field(3, 5000);
  const std::string line = varint_field(1, 1) + bytes_field(2, "ops") + varint_field(3, 7) +
                           bytes_field(4, event + bytes_field(4, stat)) + bytes_field(4, event);
  const std::string plane_bytes = bytes_field(2, "/device:TPU:0") + bytes_field(3, line) +
                                  bytes_field(4, event_metadata_entry) + bytes_field(5, stat_metadata_entry) +
                                  bytes_field(6, stat);
  tensorflow::profiler::XPlane plane;
  ASSERT_TRUE(plane.ParseFromString(plane_bytes));

  XPlaneReader reader(plane);
  EXPECT_EQ(reader.str_stat("hlo_text"), hlo);
  int events = 0;
  reader.for_each_event(plane.lines(0), [&](const XEventView& e) {
    EXPECT_EQ(e.str_stat("hlo_text"), hlo);  // the first on the event, the second from its metadata
    ++events;
  });
  EXPECT_EQ(events, 2);
  EXPECT_EQ(inflated_str_value(plane.stats(0)), hlo);
}

TEST(XPlaneReader, ACompressedStringStatThatDoesNotInflateIsAbsent) {
  tensorflow::profiler::XPlane plane;
  ASSERT_TRUE(plane.ParseFromString(
      bytes_field(5, varint_field(1, 1) + bytes_field(2, varint_field(1, 1) + bytes_field(2, "hlo_text"))) +
      bytes_field(6, varint_field(1, 1) + bytes_field(8, "not gzip"))));
  EXPECT_EQ(XPlaneReader(plane).str_stat("hlo_text"), std::nullopt);
}

TEST(XPlaneReader, TimesPastTheInt64RangeSaturateInsteadOfWrapping) {
  tensorflow::profiler::XPlane plane;
  tensorflow::profiler::XLine* line = plane.add_lines();
  line->set_timestamp_ns(114);
  tensorflow::profiler::XEvent* late = line->add_events();
  late->set_offset_ps(114'502'000'000);
  late->set_duration_ps(std::numeric_limits<int64_t>::max() - 127);
  tensorflow::profiler::XEvent* early = line->add_events();
  early->set_offset_ps(std::numeric_limits<int64_t>::min());
  early->set_duration_ps(std::numeric_limits<int64_t>::min());
  line->set_timestamp_ns(std::numeric_limits<int64_t>::min() + 1);
  std::vector<std::pair<int64_t, int64_t>> times;
  XPlaneReader(plane).for_each_event(*line, [&](const XEventView& e) { times.emplace_back(e.start_ns(), e.end_ns()); });
  ASSERT_EQ(times.size(), 2u);
  EXPECT_EQ(times[0].second, line->timestamp_ns() + std::numeric_limits<int64_t>::max() / 1000);
  EXPECT_EQ(times[1].first, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(times[1].second, std::numeric_limits<int64_t>::min());
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
