// The agent's end of Kineto's daemon protocol (dynolog's IPC fabric), against the real podscope-agent binary:
// hostile datagrams sent for real (short, oversized, wrong type, bad sizes and pid lists, a flood) are counted
// and dropped while the agent serves on; polling processes are listed in status and metrics; a taken endpoint
// is reported and the agent goes on; and a capture hands every polling process a trace request at its next
// poll, merges the trace a process delivers and names the one that never does. The Kineto processes here are
// real processes (bin/kineto_poller, and the test's own socket) speaking the protocol's bytes, as other users
// where a test says so; kineto_handoff_test.cc attacks the handoff; kineto_torch_test.py runs real PyTorch.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/clock.h"
#include "kineto/ipc/fabric_endpoint.h"
#include "kineto/ipc/fabric_message.h"
#include "podscope/v1/agent.grpc.pb.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"
#include "tensorflow/profiler_service.grpc.pb.h"
#include "tests/integration/agent_process.h"
#include "tests/integration/kineto_poller_process.h"

namespace podscope {
namespace {

using testing::agent_status;
using testing::AgentProcess;
namespace fs = std::filesystem;
namespace ipc = kineto::ipc;
using tensorflow::profiler::XSpace;

uint64_t refused(const podscope::v1::AgentStatus& status, const std::string& reason) {
  for (const auto& r : status.kineto().refused()) {
    if (r.reason() == reason) return r.count();
  }
  ADD_FAILURE() << "no refusal reason " << reason;
  return 0;
}

// A Kineto process's end of the fabric: a datagram socket bound beside the agent's socket file, as Kineto
// binds its own under KINETO_IPC_SOCKET_DIR.
class FakeKineto {
 public:
  FakeKineto(const std::string& dir, const std::string& name) : dir_(dir) {
    address_ = *ipc::fabric_address(dir + "/" + name);
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<const sockaddr*>(&address_.address), address_.length), 0);
    timeval tv{0, 300'000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    agent_ = *ipc::fabric_address(dir + "/dynolog");
  }
  ~FakeKineto() { ::close(fd_); }

  // Sends raw bytes to the agent without blocking; whether the datagram went.
  bool send(const std::string& bytes) const {
    return ::sendto(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&agent_.address),
                    agent_.length) == static_cast<ssize_t>(bytes.size());
  }
  // The next answer, or nothing within 300 ms.
  std::optional<std::string> receive() const {
    std::string buf(65536, '\0');
    const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
    if (n < 0) return std::nullopt;
    buf.resize(static_cast<size_t>(n));
    return buf;
  }
  // Polls as Kineto does; the config text answered (nullopt: no answer).
  std::optional<std::string> poll(const std::vector<int32_t>& pids, int64_t job = 0) const {
    if (!send(ipc::encode_poll({3, job, pids}))) return std::nullopt;
    std::optional<std::string> answer = receive();
    if (!answer) return std::nullopt;
    EXPECT_GE(answer->size(), ipc::kHeaderBytes);
    EXPECT_EQ(answer->substr(8, 4), std::string("req\0", 4));
    return answer->substr(ipc::kHeaderBytes);
  }
  void drain() const {
    char buf[256];
    while (::recv(fd_, buf, sizeof buf, MSG_DONTWAIT) >= 0) {}
  }

 private:
  std::string dir_;
  ipc::FabricAddress address_;
  ipc::FabricAddress agent_;
  int fd_ = -1;
};

// The users the Kineto processes run as: two others than the test's where it may take them on (root, as CI runs it),
// else the test's own.
testing::Identity rank_user() {
  return ::geteuid() == 0 ? testing::kNobody : testing::Identity{::getuid(), ::getgid(), 022};
}
testing::Identity other_user() {
  return ::geteuid() == 0 ? testing::kAttacker : testing::Identity{::getuid(), ::getgid(), 022};
}

// An agent serving a socket file in `sockets` (a directory any user may bind a socket in, as
// KINETO_IPC_SOCKET_DIR is for its processes) and handing out trace directories under `trace_root`.
struct KinetoAgent {
  explicit KinetoAgent(std::vector<std::string> extra = {}) : agent(arguments(std::move(extra))) {}

  std::vector<std::string> arguments(std::vector<std::string> extra) {
    fs::permissions(dir, fs::perms(0755));
    fs::create_directories(sockets);
    fs::permissions(sockets, fs::perms(01777));
    std::vector<std::string> args = {"--kineto_endpoint", sockets + "/dynolog", "--kineto_trace_dir",
                                     trace_root,          "--host_name",        "kineto-host"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  const testing::ScratchDirectory scratch{"agent_kineto"};
  const std::string dir = scratch.path();
  const std::string sockets = dir + "/sockets";
  const std::string trace_root = dir + "/run/kineto";
  AgentProcess agent;
};

TEST(AgentKineto, HostileDatagramsAreCountedAndDroppedWhileTheAgentServesOn) {
  KinetoAgent k;
  FakeKineto attacker(k.sockets, "attacker");
  const std::string poll = ipc::encode_poll({3, 0, {::getpid()}});
  std::map<std::string, uint64_t> sent;
  auto attack = [&](const std::string& reason, const std::string& bytes, int times) {
    for (int i = 0; i < times; ++i) {
      // A full queue on the agent's side makes the send fail: count only what went.
      if (attacker.send(bytes)) ++sent[reason];
    }
  };
  attack("short", "", 3);
  attack("short", poll.substr(0, 39), 3);
  attack("short", ipc::encode_message("req", "abc"), 3);
  attack("oversized", std::string(60000, 'x'), 3);
  attack("oversized", ipc::encode_message("req", std::string(ipc::kMaxMessageBytes, '\0')), 3);
  std::string lying = poll;
  lying[7] = '\x7f';  // announces 2^62 bytes
  attack("size_mismatch", lying, 3);
  attack("unknown_type", ipc::encode_message("hello", std::string(16, '\0')), 3);
  std::string no_pids = ipc::encode_poll({3, 0, {1}});
  no_pids[ipc::kHeaderBytes + 4] = 0;
  attack("bad_pids", no_pids, 3);
  // A flood of all of them, as fast as the socket takes it.
  const std::vector<std::pair<std::string, std::string>> kinds = {{"short", poll.substr(0, 20)},
                                                                  {"oversized", std::string(5000, 'y')},
                                                                  {"unknown_type", ipc::encode_message("x", "")}};
  const int64_t rss_before = testing::status_kib(k.agent.pid(), "VmRSS");
  for (int round = 0; round < 20000; ++round) {
    const auto& [reason, bytes] = kinds[static_cast<size_t>(round) % kinds.size()];
    attack(reason, bytes, 1);
    if (round % 1000 == 999) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  uint64_t total_sent = 0;
  for (const auto& [reason, n] : sent) total_sent += n;
  ASSERT_GT(total_sent, 1000u);

  // Everything sent is counted under its reason, nothing answered, and a real poll is still answered.
  ASSERT_TRUE(testing::wait_for(
      [&] {
        const auto s = agent_status(k.agent);
        uint64_t counted = 0;
        for (const auto& r : s.kineto().refused()) counted += r.count();
        return counted >= total_sent;
      },
      std::chrono::seconds(20)));
  const podscope::v1::AgentStatus status = agent_status(k.agent);
  for (const auto& [reason, n] : sent) EXPECT_EQ(refused(status, reason), n) << reason;
  EXPECT_EQ(status.kineto().polls(), 0u);
  EXPECT_FALSE(attacker.receive().has_value());
  std::optional<std::string> config = attacker.poll({::getpid()});
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(*config, "");
  EXPECT_FALSE(k.agent.exited());
  // Nothing grows with a flood of refusals.
  EXPECT_LT(testing::status_kib(k.agent.pid(), "VmRSS") - rss_before, 16 * 1024);

  const std::string metrics = testing::http_get(k.agent.metrics_port(), "/metrics");
  EXPECT_NE(metrics.find("podscope_kineto_refused_total{host=\"kineto-host\",reason=\"oversized\"} " +
                         std::to_string(sent["oversized"])),
            std::string::npos)
      << metrics.substr(0, 4000);
}

TEST(AgentKineto, PollingProcessesAreListedInStatusAndMetricsAsTheKernelNamesThem) {
  KinetoAgent k;
  testing::KinetoPoller rank(k.sockets, {}, rank_user());
  // Its own poll names its parent (the poller's launcher), whose parent is this test.
  ASSERT_TRUE(testing::wait_for(
      [&] {
        const auto s = agent_status(k.agent);
        return s.kineto().processes_size() == 1 && s.kineto().processes(0).poll_interval_ms() > 0;
      },
      std::chrono::seconds(10)));
  FakeKineto client(k.sockets, "client");
  // A process registers too (GPU processes do): answered with an int32.
  ASSERT_TRUE(client.send(ipc::encode_registration({1, ::getpid(), 55})));
  std::optional<std::string> registered = client.receive();
  ASSERT_TRUE(registered.has_value());
  EXPECT_EQ(registered->size(), ipc::kHeaderBytes + 4);
  EXPECT_EQ(registered->substr(8, 5), std::string("ctxt\0", 5));

  const podscope::v1::AgentStatus status = agent_status(k.agent);
  EXPECT_EQ(status.kineto().state(), podscope::v1::KinetoStatus::SERVING);
  EXPECT_NE(status.kineto().detail().find(k.sockets + "/dynolog"), std::string::npos);
  ASSERT_EQ(status.kineto().processes_size(), 1);
  const auto& p = status.kineto().processes(0);
  EXPECT_EQ(p.pid(), rank.pid());
  EXPECT_EQ(p.uid(), rank_user().uid);
  ASSERT_GE(p.ancestors_size(), 2);
  EXPECT_EQ(p.ancestors(1), ::getpid());
  EXPECT_GT(p.last_poll_ns(), 0);
  EXPECT_EQ(status.kineto().registrations(), 1u);

  // The metrics count processes; no series per process.
  ASSERT_TRUE(testing::wait_for(
      [&] {
        return testing::http_get(k.agent.metrics_port(), "/metrics")
                   .find("podscope_kineto_processes{host=\"kineto-host\"} 1") != std::string::npos;
      },
      std::chrono::seconds(5)));
  EXPECT_EQ(testing::http_get(k.agent.metrics_port(), "/metrics").find("pid=\""), std::string::npos);
}

TEST(AgentKineto, ATakenEndpointIsReportedAndTheAgentGoesOn) {
  KinetoAgent first;
  AgentProcess second({"--kineto_endpoint", first.sockets + "/dynolog"});
  const podscope::v1::AgentStatus status = agent_status(second);
  EXPECT_EQ(status.kineto().state(), podscope::v1::KinetoStatus::UNAVAILABLE);
  EXPECT_NE(status.kineto().detail().find("taken"), std::string::npos) << status.kineto().detail();
  EXPECT_NE(second.output().find("kineto_endpoint"), std::string::npos);
  // The first still serves.
  FakeKineto client(first.sockets, "client");
  EXPECT_TRUE(client.poll({::getpid()}).has_value());
  EXPECT_EQ(agent_status(first.agent).kineto().state(), podscope::v1::KinetoStatus::SERVING);
}

TEST(AgentKineto, AnEmptyEndpointTurnsItOff) {
  AgentProcess agent({"--kineto_endpoint", ""});
  const podscope::v1::AgentStatus status = agent_status(agent);
  EXPECT_EQ(status.kineto().state(), podscope::v1::KinetoStatus::OFF);
}

// Waits until every live process has polled twice (the agent knows their interval).
void wait_for_intervals(const AgentProcess& agent, int processes) {
  ASSERT_TRUE(
      testing::wait_for([&] { return testing::kineto_pollers_known(agent, processes); }, std::chrono::seconds(10)));
}

TEST(AgentKineto, ACaptureRequestsEveryPollingProcessesTraceMergesTheDeliveredAndNamesTheMissing) {
  KinetoAgent k;
  testing::KinetoPoller delivering(k.sockets, {}, rank_user());
  testing::KinetoPoller silent(k.sockets, {"--deliver", "none"}, other_user());
  wait_for_intervals(k.agent, 2);

  const int64_t asked_ns = Clock().now_ns();
  const testing::ProfileOutcome out =
      testing::profile(k.agent, testing::profile_request(1000), std::chrono::seconds(60));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  const XSpace& space = out.response.xspace();

  // Asked with no start: the agent started late enough for the next poll, and said so first.
  ASSERT_GT(space.warnings_size(), 0);
  EXPECT_EQ(space.warnings(0).rfind("capture started ", 0), 0u) << space.warnings(0);
  EXPECT_NE(space.warnings(0).find("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS"), std::string::npos);

  // Each process was handed the window and a file in its own uid's directory under the agent's root.
  ASSERT_EQ(delivering.handed().size(), 1u);
  const std::string log_file = delivering.handed()[0].log_file;
  EXPECT_EQ(log_file.rfind(k.trace_root + "/" + std::to_string(rank_user().uid) + "/trace", 0), 0u) << log_file;
  ASSERT_EQ(silent.handed().size(), 1u);
  EXPECT_EQ(silent.handed()[0].log_file.rfind(k.trace_root + "/" + std::to_string(other_user().uid) + "/trace", 0), 0u)
      << silent.handed()[0].log_file;
  EXPECT_EQ(silent.handed()[0].start_unix_ms, delivering.handed()[0].start_unix_ms);
  const xspace::XPlaneReader host(*xspace::find_plane(space, xspace::kHostPlaneName));
  const auto capture_start = host.int_stat(xspace::kCaptureStartStat);
  ASSERT_TRUE(capture_start.has_value());
  EXPECT_GT(*capture_start, asked_ns + 2'000'000'000);  // poll interval + margin ahead

  // The delivered trace is merged: rank 3's ops on its own core, its file deleted.
  const tensorflow::profiler::XPlane* rank = xspace::find_plane(space, "/device:CUSTOM:3");
  ASSERT_NE(rank, nullptr);
  size_t events = 0;
  for (const auto& line : rank->lines()) events += static_cast<size_t>(line.events_size());
  EXPECT_EQ(events, 10u);
  EXPECT_TRUE(fs::is_empty(fs::path(log_file).parent_path()));
  // The silent one is named, the rest kept.
  bool named = false;
  for (const auto& w : space.warnings()) {
    named |= w.find("Kineto process " + std::to_string(silent.pid()) + " delivered no trace") != std::string::npos;
  }
  EXPECT_TRUE(named);
  EXPECT_EQ(agent_status(k.agent).kineto().traces_merged(), 1u);
}

TEST(AgentKineto, ACaptureCutShortAnswersAtOnceWithoutWaitingForTraces) {
  KinetoAgent k;
  testing::KinetoPoller silent(k.sockets, {"--deliver", "none"}, rank_user());
  wait_for_intervals(k.agent, 1);
  auto stub = tensorflow::ProfilerService::NewStub(k.agent.channel());
  tensorflow::ProfileResponse response;
  grpc::Status answered;
  std::thread profile([&] {
    tensorflow::ProfileRequest request;
    request.set_duration_ms(30000);
    request.set_session_id("cut");
    request.set_emit_xspace(true);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    answered = stub->Profile(&context, request, &response);
  });
  // Once the window has started (the request handed says when), end it.
  ASSERT_TRUE(testing::wait_for([&] { return !silent.handed().empty(); }, std::chrono::seconds(10)));
  const int64_t start_ms = silent.handed()[0].start_unix_ms;
  ASSERT_TRUE(
      testing::wait_for([&] { return Clock().now_ns() / 1'000'000 > start_ms + 300; }, std::chrono::seconds(10)));
  const auto terminated = std::chrono::steady_clock::now();
  {
    grpc::ClientContext context;
    tensorflow::TerminateRequest request;
    request.set_session_id("cut");
    tensorflow::TerminateResponse ignored;
    ASSERT_TRUE(stub->Terminate(&context, request, &ignored).ok());
  }
  profile.join();
  ASSERT_TRUE(answered.ok()) << answered.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - terminated, std::chrono::seconds(3));
  bool named = false;
  for (const auto& w : response.xspace().warnings()) {
    named |=
        w.find("Kineto process " + std::to_string(silent.pid()) + ": the window was cut short") != std::string::npos;
  }
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace podscope
