// write_file_atomically: creates parents, replaces whole files, leaves no temporary behind, reports failures.
#include "daemon/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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

}  // namespace
}  // namespace podscope
