// Client-chosen names and paths: one path-component check, and confinement to a configured root.
#include "daemon/path_within_root.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/scratch_directory.h"

namespace podscope {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

TEST(PlainPathComponent, RejectsControlCharactersThatListingsAndLogsWouldShowAsSomethingElse) {
  for (const std::string bad : {"run\nforged", "run\x1b[2J", "tab\there", "del\x7f", "cr\r"}) {
    EXPECT_FALSE(is_plain_path_component(bad)) << bad.size() << " bytes";
  }
  EXPECT_TRUE(is_plain_path_component("Grüße_run"));
}

TEST(PlainPathComponent, AcceptsOneNameAndRejectsEverythingThatCouldLeaveADirectory) {
  EXPECT_TRUE(is_plain_path_component("2024_01_31_12_00_00"));
  EXPECT_TRUE(is_plain_path_component("host0_7001.xplane.pb"));
  EXPECT_TRUE(is_plain_path_component("..hidden"));
  for (const std::string& bad : {""s, "."s, ".."s, "a/b"s, "/etc"s, "../x"s, "a\0b"s, "\0"s}) {
    EXPECT_FALSE(is_plain_path_component(bad)) << "\"" << bad << "\" (" << bad.size() << " bytes)";
  }
}

TEST(ResolveWithinRoot, RejectsAPathWithANul) {
  const testing::ScratchDirectory scratch("path_root");
  const fs::path& root = scratch.path();
  ASSERT_TRUE(resolve_within_root(root, "run").ok());
  const auto with_nul = resolve_within_root(root, fs::path("run\0/../../etc"s));
  EXPECT_EQ(with_nul.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(with_nul.status().message()).find("NUL"), std::string::npos) << with_nul.status();
  EXPECT_EQ(resolve_within_root(root, "../outside").status().code(), absl::StatusCode::kPermissionDenied);
}

TEST(ConfineToRoot, RefusesWithoutARootAndOutsideItInTheDaemonsWords) {
  const ConfinementRefusals refusals{
      .no_root = "no root here", .outside_code = absl::StatusCode::kInvalidArgument, .outside_prefix = "outside: "};
  const auto no_root = confine_to_root("", "run", refusals);
  EXPECT_EQ(no_root.status(), absl::FailedPreconditionError("no root here"));
  const testing::ScratchDirectory scratch("confine");
  const fs::path& root = scratch.path();
  const auto inside = confine_to_root(root, "tb/run", refusals);
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_EQ(*inside, fs::weakly_canonical(root) / "tb" / "run");
  const auto outside = confine_to_root(root, "../elsewhere", refusals);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(outside.status().message()).rfind("outside: '../elsewhere' resolves to", 0), 0u)
      << outside.status();
  EXPECT_EQ(confine_to_root(root, fs::path("a\0b"s), refusals).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace podscope
