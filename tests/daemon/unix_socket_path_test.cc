// remove_stale_socket: a dead socket file goes, a live one or a non-socket is refused with the path named.
#include "daemon/unix_socket_path.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "tests/scratch_directory.h"

namespace podscope {
namespace {

namespace fs = std::filesystem;

int bind_socket(const std::string& path, bool listening) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  if (listening) {
    EXPECT_EQ(listen(fd, 1), 0);
  }
  return fd;
}

class SocketPathTest : public ::testing::Test {
 protected:
  const testing::ScratchDirectory scratch_{"sock"};
  const std::string path_ = scratch_.file("agent.sock");
};

TEST_F(SocketPathTest, MissingPathIsFine) { EXPECT_TRUE(remove_stale_socket(path_).ok()); }

TEST_F(SocketPathTest, StaleSocketIsRemoved) {
  close(bind_socket(path_, false));  // what a killed process leaves behind
  ASSERT_TRUE(fs::exists(path_));
  EXPECT_TRUE(remove_stale_socket(path_).ok());
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(SocketPathTest, LiveSocketIsRefused) {
  const int fd = bind_socket(path_, true);
  absl::Status s = remove_stale_socket(path_);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(std::string(s.message()).find(path_), std::string::npos);
  EXPECT_TRUE(fs::exists(path_));
  close(fd);
}

TEST_F(SocketPathTest, RegularFileIsLeftAlone) {
  std::ofstream(path_) << "not a socket";
  absl::Status s = remove_stale_socket(path_);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("is not a socket"), std::string::npos);
  EXPECT_TRUE(fs::exists(path_));
}

}  // namespace
}  // namespace podscope
