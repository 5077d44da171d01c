#include "daemon/unique_directory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "tests/scratch_directory.h"

namespace podscope {
namespace {

namespace fs = std::filesystem;

TEST(CreateUniqueDirectory, TakenNamesGetTheFirstFreeSuffix) {
  const testing::ScratchDirectory scratch("unique_dir_suffix");
  const fs::path parent = scratch.path() / "runs";
  EXPECT_EQ(*create_unique_directory(parent, "run"), parent / "run");
  EXPECT_EQ(*create_unique_directory(parent, "run"), parent / "run_1");
  EXPECT_EQ(*create_unique_directory(parent, "run"), parent / "run_2");
}

TEST(CreateUniqueDirectory, ConcurrentCallersNeverGetTheSameDirectory) {
  const testing::ScratchDirectory scratch("unique_dir_race");
  const fs::path parent = scratch.path() / "runs";
  std::vector<fs::path> got(16);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = *create_unique_directory(parent, "2026_11_22_10_00_00"); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<fs::path>(got.begin(), got.end()).size(), got.size());
}

TEST(CreateUniqueDirectory, UnwritableParentIsAnErrorNamingTheRun) {
  const testing::ScratchDirectory scratch("unique_dir_blocked");
  const fs::path blocker = scratch.path() / "blocker";
  std::ofstream(blocker.string()) << "a file, not a directory";
  absl::StatusOr<fs::path> got = create_unique_directory(blocker / "plugins", "run");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find((blocker / "plugins" / "run").string()), std::string::npos) << got.status();
}

}  // namespace
}  // namespace podscope
