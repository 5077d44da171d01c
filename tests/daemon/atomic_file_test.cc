// write_file_atomically: creates parents, replaces whole files, leaves no temporary behind, reports failures; the
// temporary files of writers killed mid-write are swept.
#include "daemon/atomic_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/interrupted_write.h"
#include "tests/scratch_directory.h"

namespace podscope {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AtomicFile, WritesCreatesParentsAndReplaces) {
  const testing::ScratchDirectory scratch("atomic");
  const fs::path file = scratch.path() / "a/b/capture.xplane.pb";
  ASSERT_TRUE(write_file_atomically(file, "first").ok());
  EXPECT_EQ(slurp(file), "first");
  ASSERT_TRUE(write_file_atomically(file, std::string(1 << 20, 'x')).ok());
  EXPECT_EQ(fs::file_size(file), 1u << 20);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(file.parent_path())) ++entries;
  EXPECT_EQ(entries, 1u) << "a temporary file was left behind";
}

TEST(AtomicFile, FailureNamesThePath) {
  absl::Status s = write_file_atomically("/proc/podscope-cannot-write/x", "data");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("/proc/podscope-cannot-write"), std::string::npos) << s.message();
}

TEST(AtomicFile, WritesKilledMidWayAreSweptWithTheDirectoriesTheyAloneHeld) {
  // Before, such files were never removed nor counted (84.8 MiB under a root whose snapshot cap was 64 MiB), and a
  // run directory holding only one was listed by TensorBoard as a run.
  const testing::ScratchDirectory scratch("atomic");
  const fs::path lone_run = scratch.path() / "plugins/profile/run_a";
  const fs::path kept_run = scratch.path() / "plugins/profile/run_b";
  ASSERT_TRUE(write_file_atomically(kept_run / "host.xplane.pb", "whole").ok());
  ASSERT_TRUE(testing::interrupt_a_write(lone_run / "host.xplane.pb", 1 << 20));
  ASSERT_TRUE(testing::interrupt_a_write(kept_run / "other.xplane.pb", 1 << 20));
  // A writer still at work keeps its temporary file: this process's.
  const fs::path live = kept_run / ("live.xplane.pb.tmp." + std::to_string(getpid()) + ".abcdef");
  std::ofstream(live) << "in progress";

  const SweptWrites swept = sweep_interrupted_writes(scratch.path());
  EXPECT_EQ(swept.files, 2u);
  EXPECT_EQ(swept.bytes, 2u << 20);
  EXPECT_EQ(swept.directories, 1u);
  EXPECT_FALSE(fs::exists(lone_run));
  EXPECT_EQ(slurp(kept_run / "host.xplane.pb"), "whole");
  EXPECT_TRUE(fs::exists(live));
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(kept_run)) ++entries;
  EXPECT_EQ(entries, 2u) << "the whole file and the live writer's";
  EXPECT_TRUE(fs::exists(scratch.path() / "plugins/profile")) << "only a directory its temporary file alone held";
}

}  // namespace
}  // namespace podscope
