// A run directory's names and listing: which files a run's readers see, in which order, and what a missing or empty
// run says.
#include "run_directory/run_directory.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/scratch_directory.h"

namespace podscope::run_directory {
namespace {

TEST(RunFileNames, TorchProfilerTracesAndXSpacesAreProfileFilesAndOurOwnTracesAreNot) {
  EXPECT_TRUE(is_kineto_trace_file_name("host_123.1700000000000.pt.trace.json"));
  EXPECT_TRUE(is_kineto_trace_file_name("worker0.pt.trace.json.gz"));
  EXPECT_FALSE(is_kineto_trace_file_name("host0.xplane.pb"));
  EXPECT_FALSE(is_kineto_trace_file_name("pod.trace.json.gz"));  // our own merged trace
  EXPECT_TRUE(is_profile_file_name("host0.xplane.pb"));
  EXPECT_FALSE(is_profile_file_name(".xplane.pb"));
  EXPECT_FALSE(is_profile_file_name("capture.json"));
}

TEST(RunFileNames, AStemIsTheNameWithoutItsProfileSuffix) {
  EXPECT_EQ(file_stem(host_file_name("10.0.0.2_8466")), "10.0.0.2_8466");
  EXPECT_EQ(file_stem("worker0.pt.trace.json.gz"), "worker0");
  EXPECT_EQ(file_stem("worker0.pt.trace.json"), "worker0");
  EXPECT_EQ(file_stem("capture.json"), "capture.json");
}

TEST(RunDirectory, ListsProfileFilesByNameWithTheirSizesAndNothingElse) {
  const testing::ScratchDirectory dir("run-listing");
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, int>>{{"b.xplane.pb", 3},
                                                                            {"a.xplane.pb", 5},
                                                                            {"w.pt.trace.json.gz", 1},
                                                                            {"capture.json", 2},
                                                                            {"pod.trace.json.gz", 4}}) {
    std::ofstream(dir.path() / name) << std::string(bytes, 'x');
  }
  std::filesystem::create_directory(dir.path() / "c.xplane.pb");  // a directory is no file
  const absl::StatusOr<std::vector<RunFile>> files = RunDirectory(dir.path()).profile_files();
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0].name, "a.xplane.pb");
  EXPECT_EQ((*files)[0].size, 5u);
  EXPECT_EQ((*files)[1].name, "b.xplane.pb");
  EXPECT_EQ((*files)[2].name, "w.pt.trace.json.gz");
}

TEST(RunDirectory, AMissingOrEmptyRunIsNotFoundNamingIt) {
  const testing::ScratchDirectory dir("run-empty");
  const auto missing = RunDirectory(dir.path() / "nope").profile_files();
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  const auto empty = RunDirectory(dir.path()).profile_files();
  EXPECT_TRUE(absl::IsNotFound(empty.status()));
  EXPECT_NE(empty.status().message().find("no *.xplane.pb files"), std::string::npos);
}

TEST(RunDirectory, AClaimNeverTakesARunThatIsThere) {
  const testing::ScratchDirectory dir("run-claim");
  const RunDirectory wanted = RunDirectory::in_logdir(dir.path(), "2026_11_22_10_00_00");
  EXPECT_EQ(wanted.local_path(), dir.path() / "plugins" / "profile" / "2026_11_22_10_00_00");
  const auto first = wanted.claim();
  const auto second = wanted.claim();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->name(), "2026_11_22_10_00_00");
  EXPECT_EQ(second->name(), "2026_11_22_10_00_00_1");
}

}  // namespace
}  // namespace podscope::run_directory
