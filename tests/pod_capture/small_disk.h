// A disk that fills up for real, for tests of what a full disk leaves behind: a 16 MiB tmpfs of the test's own on a
// scratch directory, filled but for the room a case asks. Mounting needs the right to (root); mounted() says whether
// it was.
#pragma once

#include <sys/mount.h>
#include <sys/statvfs.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "gtest/gtest.h"
#include "tests/scratch_directory.h"

namespace podscope::testing {

class SmallDisk {
 public:
  explicit SmallDisk(std::string_view name) : scratch_(name) {
    mounted_ = ::mount("tmpfs", dir().c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=16m") == 0;
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir().c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::filesystem::path& dir() const { return scratch_.path(); }

  // Fills the tmpfs but for `room` bytes.
  void leave_room(uintmax_t room) {
    std::filesystem::remove(dir() / "filler");
    struct statvfs fs {};
    ASSERT_EQ(::statvfs(dir().c_str(), &fs), 0);
    const uintmax_t free_bytes = uintmax_t{fs.f_bavail} * fs.f_frsize;
    ASSERT_GT(free_bytes, room);
    std::ofstream filler(dir() / "filler", std::ios::binary);
    const std::string page(4096, 'x');
    for (uintmax_t n = 0; n + room < free_bytes; n += page.size()) filler << page;
    filler.close();
    ASSERT_TRUE(filler.good());
  }

 private:
  ScratchDirectory scratch_;
  bool mounted_ = false;
};

}  // namespace podscope::testing
