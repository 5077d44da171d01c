#include "kineto/ipc/fabric_endpoint.h"

#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "kineto/ipc/fabric_message.h"
#include "tests/scratch_directory.h"

namespace podscope::kineto::ipc {
namespace {

std::string unique_name(std::string_view what) {
  return "podscope-test-" + std::string(what) + "-" + std::to_string(::getpid());
}

// A client bound as Kineto binds its own end: an abstract name, answers come back to it.
struct Client {
  explicit Client(const FabricAddress& own) {
    fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&own.address), own.length), 0);
  }
  ~Client() { ::close(fd); }
  void send(const FabricAddress& to, const std::string& bytes) const {
    ASSERT_EQ(::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to.address), to.length),
              static_cast<ssize_t>(bytes.size()));
  }
  std::string receive() const {
    std::string buf(4096, '\0');
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    buf.resize(n < 0 ? 0 : static_cast<size_t>(n));
    return buf;
  }
  int fd = -1;
};

TEST(FabricAddress, AbstractNameIncludesKinetosTrailingNul) {
  absl::StatusOr<FabricAddress> a = fabric_address("dynolog");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->address.sun_path[0], '\0');
  EXPECT_EQ(std::string(a->address.sun_path + 1, 7), "dynolog");
  EXPECT_EQ(a->length, offsetof(sockaddr_un, sun_path) + 9);
  EXPECT_TRUE(a->file.empty());
}

TEST(FabricAddress, PathIsASocketFile) {
  absl::StatusOr<FabricAddress> a = fabric_address("/tmp/x/dynolog");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->file, "/tmp/x/dynolog");
  EXPECT_EQ(a->length, offsetof(sockaddr_un, sun_path) + 15);
}

TEST(FabricAddress, RefusesBadNames) {
  EXPECT_FALSE(fabric_address("").ok());
  EXPECT_FALSE(fabric_address("a/b").ok());
  EXPECT_FALSE(fabric_address("/tmp/dir/").ok());
  EXPECT_FALSE(fabric_address(std::string(107, 'n')).ok());
  EXPECT_FALSE(fabric_address("/" + std::string(108, 'p')).ok());
}

TEST(FabricEndpoint, AnswersTheSenderOnAnAbstractName) {
  const FabricAddress server = *fabric_address(unique_name("server"));
  absl::StatusOr<FabricEndpoint> endpoint = FabricEndpoint::bind(server);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  Client client(*fabric_address(unique_name("client")));
  const std::string poll = encode_poll({3, 0, {::getpid(), ::getppid()}});
  client.send(server, poll);
  ASSERT_TRUE(endpoint->wait_readable(2000));
  std::optional<Datagram> d = endpoint->receive();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->bytes, poll);
  EXPECT_EQ(d->length, poll.size());
  // The kernel names the sender, whatever the payload says.
  ASSERT_TRUE(d->sender.has_value());
  EXPECT_EQ(d->sender->pid, ::getpid());
  EXPECT_EQ(d->sender->uid, ::getuid());
  EXPECT_EQ(d->sender->gid, ::getgid());
  ASSERT_TRUE(endpoint->answer(*d, encode_poll_answer("X=1\n")));
  EXPECT_EQ(client.receive(), encode_poll_answer("X=1\n"));
}

TEST(FabricEndpoint, TheSenderIsWhoTheKernelSaysAndPassedDescriptorsAreNotKept) {
  const FabricAddress server = *fabric_address(unique_name("creds"));
  absl::StatusOr<FabricEndpoint> endpoint = FabricEndpoint::bind(server);
  ASSERT_TRUE(endpoint.ok());
  // A forked sender claims its parent's pid in the payload and passes a descriptor along.
  const std::string lie = encode_poll({3, 0, {::getpid()}});
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    iovec data{const_cast<char*>(lie.data()), lie.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    m.msg_name = const_cast<sockaddr_un*>(&server.address);
    m.msg_namelen = server.length;
    m.msg_iov = &data;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int passed = ::open("/dev/null", O_RDONLY);
    std::memcpy(CMSG_DATA(c), &passed, sizeof passed);
    ::_exit(::sendmsg(fd, &m, 0) == static_cast<ssize_t>(lie.size()) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(status, 0);
  auto open_descriptors = [] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  const size_t before = open_descriptors();
  ASSERT_TRUE(endpoint->wait_readable(2000));
  std::optional<Datagram> d = endpoint->receive();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->bytes, lie);
  ASSERT_TRUE(d->sender.has_value());
  EXPECT_EQ(d->sender->pid, child);
  EXPECT_EQ(open_descriptors(), before);
}

TEST(FabricEndpoint, ReportsTheFullLengthOfAnOversizedDatagram) {
  const FabricAddress server = *fabric_address(unique_name("big"));
  absl::StatusOr<FabricEndpoint> endpoint = FabricEndpoint::bind(server);
  ASSERT_TRUE(endpoint.ok());
  Client client(*fabric_address(unique_name("big-client")));
  client.send(server, std::string(60000, 'x'));
  ASSERT_TRUE(endpoint->wait_readable(2000));
  std::optional<Datagram> d = endpoint->receive();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->length, 60000u);
  EXPECT_EQ(d->bytes.size(), kMaxMessageBytes + 1);
  EXPECT_FALSE(endpoint->receive().has_value());
}

TEST(FabricEndpoint, ATakenNameIsAnError) {
  const FabricAddress server = *fabric_address(unique_name("taken"));
  absl::StatusOr<FabricEndpoint> first = FabricEndpoint::bind(server);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<FabricEndpoint> second = FabricEndpoint::bind(server);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("taken"), std::string::npos) << second.status();
}

TEST(FabricEndpoint, SocketFileStaleIsReplacedLiveIsTakenAndRemovedOnClose) {
  const testing::ScratchDirectory scratch("fabric_endpoint");
  const FabricAddress server = *fabric_address(scratch.file("dynolog"));
  {
    absl::StatusOr<FabricEndpoint> live = FabricEndpoint::bind(server);
    ASSERT_TRUE(live.ok()) << live.status();
    struct stat st {};
    ASSERT_EQ(::stat(server.file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0666u);
    absl::StatusOr<FabricEndpoint> again = FabricEndpoint::bind(server);
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.status().message().find("taken"), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(server.file));
  // A stale file: bound by a socket that is gone without removing it.
  const int stale = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  ASSERT_EQ(::bind(stale, reinterpret_cast<const sockaddr*>(&server.address), server.length), 0);
  ::close(stale);
  ASSERT_TRUE(std::filesystem::exists(server.file));
  EXPECT_TRUE(FabricEndpoint::bind(server).ok());
  // Not a socket: left alone.
  {
    std::FILE* f = std::fopen(server.file.c_str(), "w");
    std::fclose(f);
  }
  EXPECT_FALSE(FabricEndpoint::bind(server).ok());
  EXPECT_TRUE(std::filesystem::exists(server.file));
}

}  // namespace
}  // namespace podscope::kineto::ipc
