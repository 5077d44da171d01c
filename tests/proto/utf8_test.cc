#include "proto/xspace/utf8.h"

#include <gtest/gtest.h>

#include "proto/xspace/xplane_builder.h"

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

}  // namespace
}  // namespace podscope::xspace
