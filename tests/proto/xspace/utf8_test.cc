#include "proto/xspace/utf8.h"

#include <gtest/gtest.h>

#include "proto/xspace/xplane_builder.h"
#include "tensorflow/profiler_service.pb.h"

namespace podscope::xspace {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(ValidUtf8, ValidTextIsUnchanged) {
  for (const std::string s : {"", "step", "Grüße", "日本語", "emoji \xF0\x9F\x98\x80", "\x7F"}) {
    EXPECT_EQ(valid_utf8(s), s);
  }
}

TEST(ValidUtf8, EveryInvalidByteBecomesOneReplacementCharacter) {
  EXPECT_EQ(valid_utf8("a\xFF"
                       "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(valid_utf8("\x80"), kFffd);                                      // lone continuation byte
  EXPECT_EQ(valid_utf8("\xC3"), kFffd);                                      // truncated sequence at the end
  EXPECT_EQ(valid_utf8("\xC0\xAF"), kFffd + kFffd);                          // overlong '/'
  EXPECT_EQ(valid_utf8("\xE0\x80\xAF"), kFffd + kFffd + kFffd);              // overlong three-byte form
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // UTF-16 surrogate
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // past U+10FFFF
  EXPECT_EQ(valid_utf8("ok\xE6\x97"
                       "x"),
            "ok" + kFffd + kFffd + "x");
}

TEST(XPlaneBuilder, StoresOnlyValidUtf8WhateverTheCallerPassed) {
  tensorflow::profiler::XSpace space;
  XPlaneBuilder plane(find_or_add_plane(space, "/device:CUSTOM:\xFF", 1));
  plane.line(1, "thread \xC3").add_event("op \xED\xA0\x80", 1000, 10).add("detail", std::string_view("x\x80y"));
  const auto& p = space.planes(0);
  EXPECT_EQ(p.name(), "/device:CUSTOM:" + kFffd);
  EXPECT_EQ(p.lines(0).name(), "thread " + kFffd);
  EXPECT_EQ(p.event_metadata().at(p.lines(0).events(0).metadata_id()).name(), "op " + kFffd + kFffd + kFffd);
  EXPECT_EQ(p.lines(0).events(0).stats(0).str_value(), "x" + kFffd + "y");
  std::string wire;
  ASSERT_TRUE(space.SerializeToString(&wire));
  tensorflow::profiler::XSpace parsed;
  EXPECT_TRUE(parsed.ParseFromString(wire)) << "a strict proto3 parse accepts it";
}

TEST(XPlaneBuilder, ExtremeClientTimesSaturateInsteadOfOverflowing) {
  tensorflow::profiler::XSpace space;
  XPlaneBuilder plane(find_or_add_plane(space, "/device:CUSTOM:0", 1));
  XLineBuilder line = plane.line(1, "t");
  line.add_event("a", 0, INT64_MAX);
  line.add_event("b", INT64_MAX, INT64_MAX);
  line.add_event("c", INT64_MIN, 5);
  const auto& l = space.planes(0).lines(0);
  ASSERT_EQ(l.events_size(), 3);
  for (const auto& e : l.events()) EXPECT_GE(e.duration_ps(), 0);
  EXPECT_EQ(l.events(0).duration_ps(), INT64_MAX);
}

// Invalid UTF-8 on the wire as a server that never validated its strings sends it: every string is written valid with
// the marker "@@@" and the marker is then overwritten, in the serialized bytes, by a UTF-16 surrogate of the same
// length (three invalid bytes).
constexpr std::string_view kMarker = "@@@";
constexpr std::string_view kSurrogate = "\xED\xA0\x80";

std::string marked_bytes_made_invalid(const google::protobuf::Message& message) {
  std::string wire = message.SerializeAsString();
  for (size_t at = wire.find(kMarker); at != std::string::npos; at = wire.find(kMarker, at)) {
    wire.replace(at, kMarker.size(), kSurrogate);
  }
  return wire;
}

// Every string field of XSpace, each with the marker; the bytes fields with it too (bytes are left as they are).
tensorflow::profiler::XSpace space_with_every_string_marked() {
  tensorflow::profiler::XSpace space;
  space.add_errors("error @@@");
  space.add_warnings("warning @@@");
  space.add_hostnames("host@@@");
  auto* plane = space.add_planes();
  plane->set_id(1);
  plane->set_name("/device:GPU:0 @@@");
  plane->add_stats()->set_str_value("plane stat @@@");
  auto& event_metadata = (*plane->mutable_event_metadata())[7];
  event_metadata.set_id(7);
  event_metadata.set_name("fusion.@@@");
  event_metadata.set_display_name("fusion @@@");
  event_metadata.set_metadata("raw @@@");
  event_metadata.add_stats()->set_str_value("metadata stat @@@");
  auto& stat_metadata = (*plane->mutable_stat_metadata())[8];
  stat_metadata.set_id(8);
  stat_metadata.set_name("hlo_op @@@");
  stat_metadata.set_description("the op @@@");
  auto* line = plane->add_lines();
  line->set_id(2);
  line->set_name("stream @@@");
  line->set_display_name("Stream @@@");
  auto* event = line->add_events();
  event->set_metadata_id(7);
  event->set_offset_ps(1000);
  event->set_duration_ps(5000);
  event->add_stats()->set_str_value("op @@@");
  auto* raw = event->add_stats();
  raw->set_metadata_id(8);
  raw->set_bytes_value("bytes @@@");
  return space;
}

constexpr int kMarkedStrings = 13;

TEST(ParseReplacingInvalidUtf8, ValidBytesParseUnchangedWithNothingRepaired) {
  const tensorflow::profiler::XSpace original = space_with_every_string_marked();
  tensorflow::profiler::XSpace parsed;
  const absl::StatusOr<int> repaired = parse_replacing_invalid_utf8(original.SerializeAsString(), parsed);
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_EQ(*repaired, 0);
  EXPECT_EQ(parsed.SerializeAsString(), original.SerializeAsString());
}

TEST(ParseReplacingInvalidUtf8, EveryKindOfStringFieldIsRepairedAndBytesFieldsKeptAsSent) {
  const std::string wire = marked_bytes_made_invalid(space_with_every_string_marked());
  tensorflow::profiler::XSpace strict;
  ASSERT_FALSE(strict.ParseFromString(wire)) << "the test needs bytes a strict proto3 parse refuses";

  tensorflow::profiler::XSpace space;
  const absl::StatusOr<int> repaired = parse_replacing_invalid_utf8(wire, space);
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_EQ(*repaired, kMarkedStrings);
  const std::string bad = kFffd + kFffd + kFffd;
  EXPECT_EQ(space.errors(0), "error " + bad);
  EXPECT_EQ(space.warnings(0), "warning " + bad);
  EXPECT_EQ(space.hostnames(0), "host" + bad);
  const auto& plane = space.planes(0);
  EXPECT_EQ(plane.name(), "/device:GPU:0 " + bad);
  EXPECT_EQ(plane.stats(0).str_value(), "plane stat " + bad);
  const auto& event_metadata = plane.event_metadata().at(7);
  EXPECT_EQ(event_metadata.name(), "fusion." + bad);
  EXPECT_EQ(event_metadata.display_name(), "fusion " + bad);
  EXPECT_EQ(event_metadata.metadata(), "raw " + std::string(kSurrogate));
  EXPECT_EQ(event_metadata.stats(0).str_value(), "metadata stat " + bad);
  const auto& stat_metadata = plane.stat_metadata().at(8);
  EXPECT_EQ(stat_metadata.name(), "hlo_op " + bad);
  EXPECT_EQ(stat_metadata.description(), "the op " + bad);
  const auto& line = plane.lines(0);
  EXPECT_EQ(line.name(), "stream " + bad);
  EXPECT_EQ(line.display_name(), "Stream " + bad);
  const auto& event = line.events(0);
  EXPECT_EQ(event.offset_ps(), 1000);
  EXPECT_EQ(event.duration_ps(), 5000);
  EXPECT_EQ(event.stats(0).str_value(), "op " + bad);
  EXPECT_EQ(event.stats(1).bytes_value(), "bytes " + std::string(kSurrogate));

  tensorflow::profiler::XSpace reparsed;
  EXPECT_TRUE(reparsed.ParseFromString(space.SerializeAsString())) << "what it gives a strict parse accepts";
}

TEST(ParseReplacingInvalidUtf8, RepairsAnXSpaceNestedInAnotherMessage) {
  tensorflow::ProfileResponse response;
  *response.mutable_xspace() = space_with_every_string_marked();
  auto* tool = response.add_tool_data();
  tool->set_name("host0.xplane.pb");
  tool->set_data(marked_bytes_made_invalid(space_with_every_string_marked()));
  const std::string wire = marked_bytes_made_invalid(response);

  tensorflow::ProfileResponse parsed;
  const absl::StatusOr<int> repaired = parse_replacing_invalid_utf8(wire, parsed);
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_EQ(*repaired, kMarkedStrings) << "the tool data is bytes: repaired when parsed as an XSpace of its own";
  EXPECT_EQ(parsed.xspace().planes(0).lines(0).name(), "stream " + kFffd + kFffd + kFffd);
  tensorflow::profiler::XSpace tool_space;
  EXPECT_EQ(parse_replacing_invalid_utf8(parsed.tool_data(0).data(), tool_space).value_or(-1), kMarkedStrings);
}

TEST(ParseReplacingInvalidUtf8, BytesThatAreNotTheMessageAreAnErrorNamingIt) {
  const std::string wire = marked_bytes_made_invalid(space_with_every_string_marked());
  tensorflow::profiler::XSpace space;
  const absl::StatusOr<int> truncated = parse_replacing_invalid_utf8(wire.substr(0, wire.size() - 3), space);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("tensorflow.profiler."), std::string::npos) << truncated.status();
  EXPECT_NE(truncated.status().message().find("breaks off at byte"), std::string::npos) << truncated.status();

  const absl::StatusOr<int> garbage = parse_replacing_invalid_utf8("\xFF\xFF\xFF\xFF", space);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("tensorflow.profiler.XSpace of 4 bytes"), std::string::npos)
      << garbage.status();
}

}  // namespace
}  // namespace podscope::xspace
