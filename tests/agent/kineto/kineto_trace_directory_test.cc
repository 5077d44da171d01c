// The trace directories on a real file system, acted on by real processes of other uids (the test runs as root and
// drops to them): each uid's directory is its and the agent's alone, what a process delivers is taken only if it is
// a regular file of its own, and removal follows nothing.
#include "agent/kineto/kineto_trace_directory.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "tests/scratch_directory.h"

namespace podscope::agent {
namespace {

namespace fs = std::filesystem;
constexpr uid_t kRank = 65534;
constexpr uid_t kAttacker = 4242;

// Runs `act` as `uid` (no groups) in a child; its result (an errno, 0 for success).
int run_as(uid_t uid, mode_t umask, const std::function<int()>& act) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::umask(umask);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) {
      ::_exit(255);
    }
    ::_exit(act());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0666);
  if (fd < 0) return errno;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok ? 0 : EIO;
}

class TraceDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "acting as other users needs root (the test drops to their uids)";
    fs::permissions(scratch.path(), fs::perms(0755));
  }
  const testing::ScratchDirectory scratch{"trace_directory"};
  const fs::path root = scratch.path() / "run" / "kineto";
};

TEST_F(TraceDirectoryTest, AUidsDirectoryIsItsAndTheAgentsAlone) {
  KinetoTraceDirectory directory(root);
  const absl::StatusOr<fs::path> dir = directory.directory_for(kRank);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, root / "65534");
  struct stat st {};
  ASSERT_EQ(::stat(root.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  // The rank writes, renames and removes in its directory, with a private umask.
  EXPECT_EQ(run_as(kRank, 077, [&] { return write_file(*dir / "t.json.tmp", "{}"); }), 0);
  EXPECT_EQ(run_as(kRank, 077,
                   [&] { return ::rename((*dir / "t.json.tmp").c_str(), (*dir / "t.json").c_str()) ? errno : 0; }),
            0);
  // Another user can neither plant nor list, there or in the root.
  EXPECT_EQ(run_as(kAttacker, 022, [&] { return ::symlink("/etc/shadow", (*dir / "u.json").c_str()) ? errno : 0; }),
            EACCES);
  EXPECT_EQ(run_as(kAttacker, 022, [&] { return ::mkfifo((*dir / "u.json").c_str(), 0666) ? errno : 0; }), EACCES);
  EXPECT_EQ(run_as(kAttacker, 022, [&] { return write_file(root / "4242", "x"); }), EACCES);
  EXPECT_EQ(run_as(kAttacker, 022, [&] { return ::access((*dir).c_str(), R_OK) ? errno : 0; }), EACCES);
  // The rank's file, taken.
  TraceLookup found = directory.find(kRank, "t.json");
  ASSERT_EQ(found.outcome, TraceLookup::Outcome::kOpened) << found.detail;
  EXPECT_EQ(found.trace.st.st_size, 2);
  EXPECT_EQ(directory.find(kRank, "absent.json").outcome, TraceLookup::Outcome::kAbsent);
}

TEST_F(TraceDirectoryTest, AnUnprivilegedAgentReadsWhatARankWroteWithAPrivateUmask) {
  // The agent as the systemd unit's user: no capability, only the ACL lets it read a 0600 file of another uid.
  constexpr uid_t kAgent = 4300;
  fs::create_directories(root.parent_path());
  ASSERT_EQ(::chown(root.parent_path().c_str(), kAgent, kAgent), 0);
  const std::string path = (root / "65534" / "t.json").string();
  const pid_t agent = ::fork();
  if (agent == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kAgent, kAgent, kAgent) != 0 ||
        ::setresuid(kAgent, kAgent, kAgent) != 0) {
      ::_exit(10);
    }
    KinetoTraceDirectory directory(root);
    // Left without its destructor: the directory stays for the rank.
    ::_exit(directory.directory_for(kRank).ok() ? 0 : 11);
  }
  int status = 0;
  ::waitpid(agent, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << WEXITSTATUS(status);
  ASSERT_EQ(run_as(kRank, 077, [&] { return write_file(path, "{\"traceEvents\": []}"); }), 0);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0007, 0u);  // others have nothing (the group bits show the ACL's mask)
  EXPECT_EQ(run_as(kAgent, 022,
                   [&] {
                     const int fd = ::open(path.c_str(), O_RDONLY);
                     return fd >= 0 ? 0 : errno;
                   }),
            0);
  EXPECT_EQ(run_as(kAttacker, 022,
                   [&] {
                     const int fd = ::open(path.c_str(), O_RDONLY);
                     return fd >= 0 ? 0 : errno;
                   }),
            EACCES);
}

TEST_F(TraceDirectoryTest, OnlyARegularFileOfTheProcesssUidIsTaken) {
  KinetoTraceDirectory directory(root);
  const fs::path dir = *directory.directory_for(kRank);
  const std::string secret = (scratch.path() / "secret").string();
  ASSERT_EQ(write_file(secret, "root's"), 0);
  fs::permissions(secret, fs::perms(0600));
  ASSERT_EQ(run_as(kRank, 022, [&] { return ::symlink(secret.c_str(), (dir / "link.json").c_str()) ? errno : 0; }), 0);
  ASSERT_EQ(run_as(kRank, 022, [&] { return ::mkfifo((dir / "fifo.json").c_str(), 0666) ? errno : 0; }), 0);
  ASSERT_EQ(run_as(kRank, 022, [&] { return ::mkdir((dir / "dir.json").c_str(), 0777) ? errno : 0; }), 0);
  ASSERT_EQ(write_file(dir / "root.json", "{}"), 0);  // a file not of the rank's uid
  const TraceLookup link = directory.find(kRank, "link.json");
  EXPECT_EQ(link.outcome, TraceLookup::Outcome::kRefused);
  EXPECT_EQ(link.refusal, TraceRefusal::kSymlink);
  // A FIFO is opened without waiting for a writer, and refused.
  const TraceLookup fifo = directory.find(kRank, "fifo.json");
  EXPECT_EQ(fifo.refusal, TraceRefusal::kNotRegularFile);
  EXPECT_EQ(directory.find(kRank, "dir.json").refusal, TraceRefusal::kNotRegularFile);
  const TraceLookup root_file = directory.find(kRank, "root.json");
  EXPECT_EQ(root_file.refusal, TraceRefusal::kWrongOwner);
  EXPECT_NE(root_file.detail.find("belongs to uid 0"), std::string::npos) << root_file.detail;
}

TEST_F(TraceDirectoryTest, RemovalFollowsNoLinkAndARootNotTheAgentsIsRefused) {
  const fs::path elsewhere = scratch.path() / "elsewhere";
  fs::create_directory(elsewhere);
  ASSERT_EQ(write_file(elsewhere / "keep", "x"), 0);
  {
    KinetoTraceDirectory directory(root);
    const fs::path dir = *directory.directory_for(kRank);
    ASSERT_EQ(run_as(kRank, 022, [&] { return ::symlink(elsewhere.c_str(), (dir / "sub").c_str()) ? errno : 0; }), 0);
    ASSERT_EQ(
        run_as(kRank, 022,
               [&] { return ::mkdir((dir / "d").c_str(), 0700) == 0 ? write_file(dir / "d" / "f", "x") : errno; }),
        0);
    directory.remove_leftovers();
    EXPECT_TRUE(fs::is_empty(dir));
    EXPECT_TRUE(fs::exists(elsewhere / "keep"));
  }
  // What the agent made is gone with it; the root stays.
  EXPECT_TRUE(fs::is_empty(root));
  // A root another user made first (in a directory anyone may write) is not used.
  const fs::path taken = scratch.path() / "shared" / "kineto";
  fs::create_directories(taken.parent_path());
  fs::permissions(taken.parent_path(), fs::perms(01777));
  ASSERT_EQ(run_as(kAttacker, 022, [&] { return ::mkdir(taken.c_str(), 0777) ? errno : 0; }), 0);
  KinetoTraceDirectory directory(taken);
  const absl::StatusOr<fs::path> refused = directory.directory_for(kRank);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("belongs to uid 4242"), std::string::npos) << refused.status();
  // Two agents never share a root.
  KinetoTraceDirectory first(root);
  ASSERT_TRUE(first.directory_for(kRank).ok());
  KinetoTraceDirectory second(root);
  const absl::StatusOr<fs::path> busy = second.directory_for(kRank);
  ASSERT_FALSE(busy.ok());
  EXPECT_NE(busy.status().message().find("in use by another podscope agent"), std::string::npos) << busy.status();
}

}  // namespace
}  // namespace podscope::agent
