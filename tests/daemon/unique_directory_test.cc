#include "daemon/unique_directory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <thread>
#include <vector>

namespace podscope {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("podscope_unique_dir_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  return dir;
}

TEST(CreateUniqueDirectory, TakenNamesGetTheFirstFreeSuffix) {
  const fs::path parent = scratch("suffix");
  EXPECT_EQ(*create_unique_directory(parent, "run"), parent / "run");
  EXPECT_EQ(*create_unique_directory(parent, "run"), parent / "run_1");
  EXPECT_EQ(*create_unique_directory(parent, "run"), parent / "run_2");
  fs::remove_all(parent);
}

TEST(CreateUniqueDirectory, ConcurrentCallersNeverGetTheSameDirectory) {
  const fs::path parent = scratch("race");
  std::vector<fs::path> got(16);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = *create_unique_directory(parent, "2026_11_22_10_00_00"); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<fs::path>(got.begin(), got.end()).size(), got.size());
  fs::remove_all(parent);
}

TEST(CreateUniqueDirectory, UnwritableParentIsAnErrorNamingTheRun) {
  const fs::path blocker = scratch("blocked");
  std::ofstream(blocker.string()) << "a file, not a directory";
  absl::StatusOr<fs::path> got = create_unique_directory(blocker / "plugins", "run");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find((blocker / "plugins" / "run").string()), std::string::npos) << got.status();
  fs::remove(blocker);
}

}  // namespace
}  // namespace podscope
