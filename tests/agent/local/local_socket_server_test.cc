// The agent's local socket with raw clients: socket mode 0660, stale socket files replaced and live ones
// refused, peers with untrusted uids (SO_PEERCRED) dropped, malformed / oversized / out-of-order frames
// close only that connection (with the agent and other clients unharmed), disconnects leave the
// registry, an unanswered capture close drops a hung client. Protocol versions: a Hello is answered with
// the newest common version, a version-1 client (no Hello) is fully served, a client of versions the agent
// does not serve is refused with a reason (and a log line), frames outside a connection's version close it
// (input stages from a version-2 client, allocation records from a version-3 one), a version-2 client is served
// next to a current one whose input stages are held, and a current client's allocation records are held in the
// window (and in the flight recorder) as allocation and deallocation events.
// Bounds: connections beyond the total and per-uid caps are closed at accept, a connection that does not register
// in time or stalls inside a frame is closed while a quiet registered client stays, each refusal counted by
// reason; members of the agent's group are trusted when socket_group is empty.
#include "agent/local/local_socket_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <grp.h>

#include <optional>
#include <thread>

#include "agent/local/recorded_events.h"
#include "tests/agent/events/decoded_events.h"
#include "tests/client/mini_agent.h"
#include "tests/sanitized.h"

namespace podscope::agent {
namespace {

using namespace std::chrono_literals;
using testing::MiniAgent;

// A raw client speaking frames by hand.
class RawClient {
 public:
  explicit RawClient(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send_bytes(const std::string& bytes) { ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  void send_msg(const local::Message& m) {
    std::string f;
    local::encode_frame(m, f);
    send_bytes(f);
  }
  // The next frame from the agent, or nullopt when none comes within `timeout` (or the agent closed).
  std::optional<local::Message> read_msg(std::chrono::milliseconds timeout = 2s) {
    set_timeout(timeout);
    std::string error;
    while (in_.size() < local::kFrameHeaderBytes) {
      if (!receive()) return std::nullopt;
    }
    const auto header =
        local::decode_header(std::string_view(in_).substr(0, local::kFrameHeaderBytes), local::kProtocolVersion, error);
    if (!header) return std::nullopt;
    while (in_.size() < local::kFrameHeaderBytes + header->payload_bytes) {
      if (!receive()) return std::nullopt;
    }
    auto msg = local::decode_payload(
        header->type, std::string_view(in_).substr(local::kFrameHeaderBytes, header->payload_bytes), error);
    in_.erase(0, local::kFrameHeaderBytes + header->payload_bytes);
    return msg;
  }
  // Hello, Welcome, Register at the agreed version: a current client's handshake.
  void negotiate_and_register(int32_t core) {
    send_msg(local::HelloMsg{});
    const auto welcome = read_msg();
    ASSERT_TRUE(welcome && std::holds_alternative<local::WelcomeMsg>(*welcome));
    send_msg(local::RegisterMsg{std::get<local::WelcomeMsg>(*welcome).version, 0, "raw", "job", {core}});
  }
  // True once the agent closed this connection (EOF), waiting up to `timeout`.
  bool closed_by_agent(std::chrono::milliseconds timeout) {
    set_timeout(timeout);
    char buf[256];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;  // reset: closed; timeout: still open
    }
  }

 private:
  void set_timeout(std::chrono::milliseconds timeout) {
    const auto us = std::chrono::microseconds(timeout).count();
    timeval tv{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  bool receive() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string in_;
};

LocalSocketConfig config_at(const std::string& path) {
  LocalSocketConfig c;
  c.path = path;
  return c;
}

uint64_t refused(const LocalSocketCounts& counts, LocalRefusal reason) {
  return counts.refused[static_cast<size_t>(reason)];
}

// Runs `client` in a child process with the given uid, primary gid and supplementary groups; true when the agent
// answered its Hello with a Welcome (it was trusted).
bool welcomed_as(uid_t uid, gid_t gid, const std::vector<gid_t>& groups, const std::string& path) {
  int result[2];
  if (::pipe(result) != 0) return false;
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(2);
    RawClient c(path);
    c.send_msg(local::HelloMsg{});
    const auto answer = c.read_msg();
    const char welcomed = answer && std::holds_alternative<local::WelcomeMsg>(*answer) ? 1 : 0;
    (void)!::write(result[1], &welcomed, 1);
    ::_exit(0);
  }
  char welcomed = 0;
  const bool read = ::read(result[0], &welcomed, 1) == 1;
  ::waitpid(child, nullptr, 0);
  ::close(result[0]);
  ::close(result[1]);
  return read && welcomed == 1;
}

// What a version-1 client (one that predates negotiation) sends first.
local::RegisterMsg version1_registration(int32_t core) { return {1, 0, "raw", "job", {core}}; }

class LocalSocketServerTest : public ::testing::Test {
 protected:
  void SetUp() override { agent_.start(); }
  testing::ScratchDirectory dir_;
  std::string path_ = dir_.file("agent.sock");
  MiniAgent agent_{path_};

  // `older`, a client of protocol `version` registered as "v<version>" on core 4, and `current` on core 5: both
  // registered, then told that capture `session` opened.
  void register_both_and_open_window(RawClient& older, uint32_t version, RawClient& current, uint64_t session) {
    older.send_msg(local::HelloMsg{version, 1});
    const auto welcome = older.read_msg();
    ASSERT_TRUE(welcome && std::holds_alternative<local::WelcomeMsg>(*welcome));
    EXPECT_EQ(std::get<local::WelcomeMsg>(*welcome).version, version);
    older.send_msg(local::RegisterMsg{version, 0, "v" + std::to_string(version), "job", {4}});
    current.negotiate_and_register(5);
    ASSERT_TRUE(podscope::testing::wait_for([&] { return agent_.registry().clients().size() == 2; }, 2s));
    agent_.registry().open_window(session, 0, 1000, 0, size_t{64} << 20);
    for (RawClient* c : {&older, &current}) {
      const auto open = c->read_msg();
      ASSERT_TRUE(open && std::holds_alternative<local::CaptureOpenMsg>(*open));
    }
  }
};

TEST_F(LocalSocketServerTest, SocketIsCreated0660) {
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
}

TEST_F(LocalSocketServerTest, LiveSocketIsRefusedStaleOneReplaced) {
  boost::asio::io_context io;
  ClientRegistry registry;
  prometheus::Registry metrics;
  LocalSocketCounters counters(metrics, "test");
  LocalSocketServer second(io, config_at(path_), registry, counters, {});
  const auto status = second.start();
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  agent_.stop();
  // A socket file left behind by an agent that died.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  EXPECT_TRUE(second.start().ok());
  second.stop();
}

TEST_F(LocalSocketServerTest, NonSocketPathIsAnErrorNamingIt) {
  const std::string file = dir_.file("plain");
  ::close(::creat(file.c_str(), 0600));
  boost::asio::io_context io;
  ClientRegistry registry;
  prometheus::Registry metrics;
  LocalSocketCounters counters(metrics, "test");
  LocalSocketServer server(io, config_at(file), registry, counters, {});
  const auto status = server.start();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find(file), std::string::npos);
}

TEST_F(LocalSocketServerTest, MalformedFramesCloseOnlyThatConnection) {
  RawClient good(path_);
  good.negotiate_and_register(1);
  ASSERT_TRUE(podscope::testing::wait_for([&] { return agent_.registry().clients().size() == 1; }, 2s));

  RawClient garbage(path_);
  garbage.send_bytes("GET / HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(garbage.closed_by_agent(2s));

  RawClient oversized(path_);
  std::string header(8, '\0');
  const uint32_t len = 64u << 20;
  std::memcpy(header.data(), &len, 4);
  header[4] = 2;  // steps
  header[6] = 0x50;
  header[7] = 0x53;
  oversized.send_bytes(header);
  EXPECT_TRUE(oversized.closed_by_agent(2s));

  RawClient unregistered(path_);
  unregistered.send_msg(local::StepsMsg{{{0, 1, 10, 20, 0, 0}}});
  EXPECT_TRUE(unregistered.closed_by_agent(2s));

  RawClient bad_payload(path_);
  bad_payload.negotiate_and_register(2);
  std::string f;
  local::encode_frame(local::CaptureDoneMsg{1, 2}, f);
  f[0] = 4;  // claims 4 payload bytes of a 16-byte message: the next header is garbage
  bad_payload.send_bytes(f);
  EXPECT_TRUE(bad_payload.closed_by_agent(2s));
  EXPECT_EQ(refused(agent_.counts(), LocalRefusal::kMalformed), 4u);

  // The agent and the well-behaved client are unharmed.
  EXPECT_FALSE(good.closed_by_agent(100ms));
  good.send_msg(local::StepsMsg{{{1, 7, 100, 200, 0, 0}}});
  EXPECT_TRUE(podscope::testing::wait_for(
      [&] {
        for (const auto& c : agent_.registry().clients())
          if (!agent_.steps_of(c.pid).empty()) return true;
        return false;
      },
      2s));
  EXPECT_TRUE(podscope::testing::wait_for([&] { return agent_.registry().clients().size() == 1; }, 2s));
}

TEST_F(LocalSocketServerTest, PeersWithUntrustedUidsAreDropped) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
  // Let the other uid reach the socket: the credential check must stop it.
  ::chmod(std::filesystem::path(path_).parent_path().c_str(), 0755);
  ::chmod(path_.c_str(), 0666);
  int result[2];
  ASSERT_EQ(::pipe(result), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    RawClient c(path_);
    c.send_msg(local::HelloMsg{});
    const char closed = c.connected() && c.closed_by_agent(2s) ? 1 : 0;
    (void)!::write(result[1], &closed, 1);
    ::_exit(0);
  }
  char closed = 0;
  ASSERT_EQ(::read(result[0], &closed, 1), 1);
  ::waitpid(child, nullptr, 0);
  ::close(result[0]);
  ::close(result[1]);
  EXPECT_EQ(closed, 1);
  EXPECT_TRUE(agent_.registry().clients().empty());
  EXPECT_EQ(refused(agent_.counts(), LocalRefusal::kUntrusted), 1u);
}

TEST_F(LocalSocketServerTest, MembersOfTheAgentsGroupAreTrustedWhenSocketGroupIsEmpty) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
  ::chmod(std::filesystem::path(path_).parent_path().c_str(), 0755);  // the socket itself stays 0660
  const gid_t agents_group = ::getegid();
  const uid_t other_uid = 65534;
  EXPECT_TRUE(welcomed_as(other_uid, agents_group, {}, path_)) << "primary group member refused";
  EXPECT_TRUE(welcomed_as(other_uid, 65534, {agents_group}, path_)) << "supplementary group member refused";
  EXPECT_EQ(refused(agent_.counts(), LocalRefusal::kUntrusted), 0u);
}

TEST_F(LocalSocketServerTest, ConnectionsBeyondTheCapsAreClosedAtAcceptAndCounted) {
  testing::ScratchDirectory dir;
  // Every connection of this test comes from one uid: the per-uid cap is met first.
  MiniAgent per_uid(dir.file("per_uid.sock"), {.max_connections = 100, .max_connections_per_uid = 3});
  per_uid.start();
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 5; ++i) clients.push_back(std::make_unique<RawClient>(dir.file("per_uid.sock")));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(clients[i]->closed_by_agent(100ms)) << i;
  for (int i = 3; i < 5; ++i) EXPECT_TRUE(clients[i]->closed_by_agent(2s)) << i;
  EXPECT_EQ(refused(per_uid.counts(), LocalRefusal::kUidCap), 2u);
  EXPECT_EQ(per_uid.counts().connections, 3u);
  // A connection that leaves frees its place.
  clients[0].reset();
  ASSERT_TRUE(podscope::testing::wait_for([&] { return per_uid.counts().connections == 2; }, 2s));
  RawClient again(dir.file("per_uid.sock"));
  again.negotiate_and_register(1);
  EXPECT_TRUE(podscope::testing::wait_for([&] { return per_uid.counts().registered == 1; }, 2s));

  MiniAgent total(dir.file("total.sock"), {.max_connections = 2, .max_connections_per_uid = 100});
  total.start();
  RawClient first(dir.file("total.sock")), second(dir.file("total.sock")), third(dir.file("total.sock"));
  EXPECT_TRUE(third.closed_by_agent(2s));
  EXPECT_FALSE(first.closed_by_agent(100ms));
  EXPECT_EQ(refused(total.counts(), LocalRefusal::kTotalCap), 1u);
  EXPECT_EQ(refused(total.counts(), LocalRefusal::kUidCap), 0u);
}

TEST_F(LocalSocketServerTest, ConnectionsThatDoNotRegisterInTimeAreClosedAndCounted) {
  testing::ScratchDirectory dir;
  MiniAgent agent(dir.file("agent.sock"), {.handshake_timeout_ms = 200});
  agent.start();
  RawClient silent(dir.file("agent.sock"));
  RawClient hello_only(dir.file("agent.sock"));  // negotiates, never registers
  hello_only.send_msg(local::HelloMsg{});
  ASSERT_TRUE(hello_only.read_msg().has_value());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(silent.closed_by_agent(3s));
  EXPECT_TRUE(hello_only.closed_by_agent(3s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  EXPECT_EQ(refused(agent.counts(), LocalRefusal::kIdleTimeout), 2u);
  EXPECT_TRUE(podscope::testing::wait_for([&] { return agent.counts().connections == 0; }, 2s));
}

TEST_F(LocalSocketServerTest, QuietRegisteredClientStaysAndAStalledFrameIsClosed) {
  testing::ScratchDirectory dir;
  MiniAgent agent(dir.file("agent.sock"), {.handshake_timeout_ms = 200, .frame_timeout_ms = 200});
  agent.start();
  RawClient quiet(dir.file("agent.sock"));
  quiet.negotiate_and_register(1);
  RawClient stalling(dir.file("agent.sock"));
  stalling.negotiate_and_register(2);
  ASSERT_TRUE(podscope::testing::wait_for([&] { return agent.registry().clients().size() == 2; }, 2s));
  // A header declaring 1000 bytes of steps, and 10 of them.
  std::string frame;
  local::encode_frame(local::StepsMsg{{local::StepMsg{}}}, frame);
  std::string header = frame.substr(0, local::kFrameHeaderBytes);
  const uint32_t declared = 1000;
  std::memcpy(header.data(), &declared, sizeof(declared));
  stalling.send_bytes(header + std::string(10, '\0'));
  EXPECT_TRUE(stalling.closed_by_agent(3s));
  EXPECT_FALSE(quiet.closed_by_agent(1s)) << "a registered client quiet between frames was closed";
  EXPECT_EQ(agent.counts().registered, 1u);
  EXPECT_EQ(refused(agent.counts(), LocalRefusal::kIdleTimeout), 1u);
  quiet.send_msg(local::StepsMsg{{local::StepMsg{}}});  // still served
  EXPECT_TRUE(podscope::testing::wait_for([&] { return !agent.steps_of(::getpid()).empty(); }, 2s));
}

TEST_F(LocalSocketServerTest, DisconnectLeavesTheRegistryAndHungClientsAreDropped) {
  auto leaving = std::make_unique<RawClient>(path_);
  leaving->negotiate_and_register(1);
  RawClient hung(path_);  // registers, then never answers a capture close
  hung.send_msg(version1_registration(2));
  ASSERT_TRUE(podscope::testing::wait_for([&] { return agent_.registry().clients().size() == 2; }, 2s));
  leaving.reset();
  ASSERT_TRUE(podscope::testing::wait_for([&] { return agent_.registry().clients().size() == 1; }, 2s));

  ClientRegistry& registry = agent_.registry();
  registry.open_window(1, 0, 1000, 0, size_t{64} << 20);
  registry.close_window(1000);
  const auto t0 = std::chrono::steady_clock::now();
  const auto gathered = registry.collect(200ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_FALSE(gathered[0].complete);
  EXPECT_TRUE(hung.closed_by_agent(2s));
  EXPECT_TRUE(podscope::testing::wait_for([&] { return registry.clients().empty(); }, 2s));
}

TEST_F(LocalSocketServerTest, HelloIsAnsweredWithTheNewestVersionBothSpeak) {
  RawClient current(path_);
  current.negotiate_and_register(1);
  RawClient newer(path_);  // a client upgraded before its agent
  newer.send_msg(local::HelloMsg{local::kProtocolVersion + 3, local::kOldestProtocolVersion});
  const auto welcome = newer.read_msg();
  ASSERT_TRUE(welcome && std::holds_alternative<local::WelcomeMsg>(*welcome));
  EXPECT_EQ(std::get<local::WelcomeMsg>(*welcome).version, local::kProtocolVersion);
  newer.send_msg(local::RegisterMsg{local::kProtocolVersion, 0, "newer", "job", {2}});
  ASSERT_TRUE(podscope::testing::wait_for([&] { return agent_.registry().clients().size() == 2; }, 2s));
  for (const auto& c : agent_.registry().clients()) EXPECT_EQ(c.protocol_version, local::kProtocolVersion);
}

TEST_F(LocalSocketServerTest, VersionOneClientWithoutHelloIsFullyServed) {
  RawClient old(path_);  // exactly what clients sent before versions were negotiated
  old.send_msg(version1_registration(4));
  old.send_msg(local::StepsMsg{{{4, 9, 100, 200, 0, 0}}});
  ASSERT_TRUE(podscope::testing::wait_for(
      [&] {
        const auto clients = agent_.registry().clients();
        return clients.size() == 1 && agent_.steps_of(clients[0].pid).size() == 1;
      },
      2s));
  EXPECT_EQ(agent_.registry().clients()[0].protocol_version, 1u);

  ClientRegistry& registry = agent_.registry();
  registry.open_window(7, 0, 1000, 0, size_t{64} << 20);
  const auto open = old.read_msg();  // no Welcome: the window is the first thing it hears
  ASSERT_TRUE(open && std::holds_alternative<local::CaptureOpenMsg>(*open));
  local::EventsMsg events;
  events.session = 7;
  events.core = 4;
  events.names = {{1, "matmul"}};
  events.events = {{local::EventKind::kCompute, 1, 0, 150, 20, 1000, 0}};
  old.send_msg(events);
  registry.close_window(1000);
  const auto close = old.read_msg();
  ASSERT_TRUE(close && std::holds_alternative<local::CaptureCloseMsg>(*close));
  old.send_msg(local::CaptureDoneMsg{7, 0});
  const auto gathered = registry.collect(2s);
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_TRUE(gathered[0].complete);
  EXPECT_EQ(gathered[0].events.kept_events, 1u);
  EXPECT_FALSE(old.closed_by_agent(100ms));
}

TEST_F(LocalSocketServerTest, VersionTwoClientIsServedAndInputStagesAreHeldOnlyFromLaterOnes) {
  RawClient v2(path_);  // a client of the version before input stages
  RawClient current(path_);
  ASSERT_NO_FATAL_FAILURE(register_both_and_open_window(v2, 2, current, 7));
  ClientRegistry& registry = agent_.registry();
  local::EventsMsg events;
  events.session = 7;
  events.core = 4;
  events.names = {{1, "matmul"}};
  events.events = {{local::EventKind::kCompute, 1, 0, 150, 20, 1000, 0}};
  v2.send_msg(events);
  local::InputStagesMsg stages;
  stages.session = 7;
  stages.core = 5;
  stages.names = {{2, "read_shard"}};
  stages.stages = {{2, local::InputStageCategory::kRead, 11, 10, 160, 30}};
  current.send_msg(stages);
  registry.close_window(1000);
  for (RawClient* c : {&v2, &current}) {
    const auto close = c->read_msg();
    ASSERT_TRUE(close && std::holds_alternative<local::CaptureCloseMsg>(*close));
    c->send_msg(local::CaptureDoneMsg{7, 0});
  }
  const auto gathered = registry.collect(2s);
  ASSERT_EQ(gathered.size(), 2u);
  for (const auto& g : gathered) {
    EXPECT_TRUE(g.complete);
    const std::vector<HeldEvent> events = testing::decoded(g.events);
    ASSERT_EQ(events.size(), 1u) << g.client.program;
    const HeldEvent& e = events[0];
    if (g.client.program == "v2") {
      EXPECT_EQ(e.kind, local::EventKind::kCompute);
    } else {
      EXPECT_EQ(e.kind, local::EventKind::kInputStage);
      EXPECT_EQ(g.events.names[e.id], "read_shard");
      EXPECT_EQ(e.value, 11);
      EXPECT_EQ(e.value2, 10);
    }
  }
  EXPECT_FALSE(v2.closed_by_agent(100ms));

  v2.send_msg(stages);  // not in version 2: a malformed frame
  EXPECT_TRUE(v2.closed_by_agent(2s));
  EXPECT_FALSE(current.closed_by_agent(100ms));
}

TEST_F(LocalSocketServerTest, AllocationsAreHeldInTheWindowAndAVersionThreeClientSendingThemIsClosed) {
  RawClient v3(path_);  // a client of the version before allocation records
  RawClient current(path_);
  ASSERT_NO_FATAL_FAILURE(register_both_and_open_window(v3, 3, current, 8));
  ClientRegistry& registry = agent_.registry();
  local::AllocationsMsg allocations;
  allocations.session = 8;
  allocations.core = 5;
  allocations.names = {{2, "GPU_0_bfc"}, {3, "matmul"}};
  allocations.allocations = {{local::AllocationOp::kAllocate, 2, 3, 0x1000, 4096, 150},
                             {local::AllocationOp::kFree, 2, 0, 0x1000, 0, 170}};
  current.send_msg(allocations);
  registry.close_window(1000);
  const auto close = current.read_msg();
  ASSERT_TRUE(close && std::holds_alternative<local::CaptureCloseMsg>(*close));
  current.send_msg(local::CaptureDoneMsg{8, 0});
  v3.send_msg(allocations);  // not in version 3: a malformed frame
  EXPECT_TRUE(v3.closed_by_agent(2s));
  const auto gathered = registry.collect(2s);
  const auto it = std::find_if(gathered.begin(), gathered.end(),
                               [](const LocalClientCapture& g) { return g.client.program == "raw"; });
  ASSERT_NE(it, gathered.end());
  const std::vector<HeldEvent> events = testing::decoded(it->events);
  ASSERT_EQ(events.size(), 2u);
  const HeldEvent& allocated = events[0];
  EXPECT_EQ(allocated.kind, local::EventKind::kAllocation);
  EXPECT_EQ(it->events.names[allocated.id], "GPU_0_bfc");
  EXPECT_EQ(it->events.names[static_cast<uint32_t>(allocated.arg)], "matmul");
  EXPECT_EQ(allocated.value, 4096);
  EXPECT_EQ(allocated.value2, 0x1000);
  EXPECT_EQ(allocated.start_ns, 150);
  EXPECT_EQ(events[1].kind, local::EventKind::kDeallocation);
  EXPECT_FALSE(current.closed_by_agent(100ms));
}

TEST_F(LocalSocketServerTest, WhileRecordingEventsInputStagesAndAllocationsAllReachTheRecorder) {
  RawClient client(path_);
  client.negotiate_and_register(5);
  ASSERT_TRUE(podscope::testing::wait_for([&] { return agent_.registry().clients().size() == 1; }, 2s));
  auto recorder = std::make_shared<RecordedEvents>(FlightRecorderSettings{}, [] { return int64_t{1'000'000}; });
  agent_.registry().start_recording(recorder);
  const auto open = client.read_msg();
  ASSERT_TRUE(open && std::holds_alternative<local::CaptureOpenMsg>(*open));
  const uint64_t session = std::get<local::CaptureOpenMsg>(*open).session;

  client.send_msg(local::EventsMsg{session, 5, 42, {{1, "matmul"}}, {{local::EventKind::kCompute, 1, 0, 800'000, 20}}});
  client.send_msg(local::InputStagesMsg{
      session, 5, 42, {{2, "read_batch"}}, {{2, local::InputStageCategory::kRead, 11, 0, 850'000, 30}}});
  client.send_msg(local::AllocationsMsg{session,
                                        5,
                                        42,
                                        {{3, "host_pinned"}},
                                        {{local::AllocationOp::kAllocate, 3, 0, 0x2000, 64, 900'000},
                                         {local::AllocationOp::kFree, 3, 0, 0x2000, 0, 950'000}}});
  ASSERT_TRUE(podscope::testing::wait_for([&] { return recorder->state().held_events == 4; }, 2s))
      << recorder->state().held_events;
  const auto window = recorder->window(0, 1'000'000);
  ASSERT_EQ(window.size(), 1u);
  std::vector<std::pair<local::EventKind, std::string>> held;
  for (const HeldEvent& e : testing::decoded(window[0].events)) held.emplace_back(e.kind, window[0].events.names[e.id]);
  EXPECT_THAT(held, ::testing::ElementsAre(::testing::Pair(local::EventKind::kCompute, "matmul"),
                                           ::testing::Pair(local::EventKind::kInputStage, "read_batch"),
                                           ::testing::Pair(local::EventKind::kAllocation, "host_pinned"),
                                           ::testing::Pair(local::EventKind::kDeallocation, "host_pinned")));
  agent_.registry().stop_recording();
}

TEST_F(LocalSocketServerTest, UnservedVersionsAreRefusedWithAReasonAndALogLine) {
  RawClient good(path_);
  good.negotiate_and_register(1);
  ASSERT_TRUE(podscope::testing::wait_for([&] { return agent_.registry().clients().size() == 1; }, 2s));

  ::testing::internal::CaptureStderr();
  RawClient future(path_);  // speaks only the version after this agent's
  future.send_msg(local::HelloMsg{local::kProtocolVersion + 1, local::kProtocolVersion + 1});
  const auto refused = future.read_msg();
  const bool closed = future.closed_by_agent(2s);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(refused && std::holds_alternative<local::RefusedMsg>(*refused));
  const auto& r = std::get<local::RefusedMsg>(*refused);
  EXPECT_EQ(r.min_version, local::kOldestProtocolVersion);
  EXPECT_EQ(r.max_version, local::kProtocolVersion);
  const std::string future_version = std::to_string(local::kProtocolVersion + 1);
  const std::string reason = "it speaks protocol versions " + future_version + ".." + future_version +
                             ", this agent serves " + std::to_string(local::kOldestProtocolVersion) + ".." +
                             std::to_string(local::kProtocolVersion);
  EXPECT_EQ(r.reason, reason);
  EXPECT_TRUE(closed);
  EXPECT_NE(log.find("refusing local client pid " + std::to_string(::getpid()) + ": " + reason), std::string::npos)
      << log;

  // The agent and the registered client carry on.
  EXPECT_FALSE(good.closed_by_agent(100ms));
  EXPECT_EQ(agent_.registry().clients().size(), 1u);
}

TEST_F(LocalSocketServerTest, FramesOutsideTheConnectionsVersionCloseIt) {
  RawClient old(path_);  // version 1 has no Hello: an unknown frame type, as it always was
  old.send_msg(version1_registration(1));
  old.send_msg(local::HelloMsg{});
  EXPECT_TRUE(old.closed_by_agent(2s));

  RawClient unnegotiated(path_);  // versions after 1 must say Hello first
  unnegotiated.send_msg(local::RegisterMsg{2, 0, "raw", "job", {1}});
  EXPECT_TRUE(unnegotiated.closed_by_agent(2s));

  RawClient mismatched(path_);
  mismatched.send_msg(local::HelloMsg{});
  ASSERT_TRUE(mismatched.read_msg());
  mismatched.send_msg(version1_registration(1));
  EXPECT_TRUE(mismatched.closed_by_agent(2s));

  RawClient twice(path_);
  twice.negotiate_and_register(1);
  twice.send_msg(local::HelloMsg{});
  EXPECT_TRUE(twice.closed_by_agent(2s));
  EXPECT_TRUE(podscope::testing::wait_for([&] { return agent_.registry().clients().empty(); }, 2s));
}

// Out of descriptors: the server's accepts fail with EMFILE. It must back off (not spin a core) and serve the
// waiting client once descriptors are free again.
TEST_F(LocalSocketServerTest, OutOfDescriptorsTheAcceptLoopBacksOffAndRecovers) {
#ifdef PODSCOPE_SANITIZED
  GTEST_SKIP() << "UBSan's vptr check probes memory through a new pipe: with no descriptor left it reports every "
                  "virtual call as undefined behaviour";
#endif
  rlimit original{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &original), 0);
  const int probe = ::socket(AF_UNIX, SOCK_STREAM, 0);  // the client's descriptor, made before the shortage
  ASSERT_GE(probe, 0);
  const int highest = ::dup(0);  // the lowest free descriptor after `probe`: the new limit makes it the last
  ASSERT_GE(highest, 0);
  ::close(highest);
  rlimit scarce = original;
  scarce.rlim_cur = static_cast<rlim_t>(highest);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &scarce), 0);

  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(1s);
  ::getrusage(RUSAGE_SELF, &after);
  const auto cpu_us = [](const rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1'000'000LL + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
  };
  const long long used_us = cpu_us(after) - cpu_us(before);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &original), 0);
  EXPECT_LT(used_us, 300'000) << "the accept loop spun: " << used_us << " us of CPU in 1 s of EMFILE";

  // Descriptors are back: the waiting connection is accepted and served.
  std::string hello;
  local::encode_frame(local::HelloMsg{}, hello);
  ASSERT_EQ(::send(probe, hello.data(), hello.size(), MSG_NOSIGNAL), static_cast<ssize_t>(hello.size()));
  timeval tv{3, 0};
  ::setsockopt(probe, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char header[local::kFrameHeaderBytes];
  EXPECT_EQ(::recv(probe, header, sizeof(header), MSG_WAITALL), static_cast<ssize_t>(sizeof(header)))
      << "no Welcome after the shortage ended";
  ::close(probe);
}

}  // namespace
}  // namespace podscope::agent
