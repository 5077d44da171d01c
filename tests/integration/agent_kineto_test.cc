// The agent's end of Kineto's daemon protocol (dynolog's IPC fabric), against the real podscope-agent binary:
// hostile datagrams sent for real (short, oversized, wrong type, bad sizes and pid lists, a flood) are counted
// and dropped while the agent serves on; polling processes are listed in status and metrics; a taken endpoint
// is reported and the agent goes on; and a capture hands every polling process a trace request at its next
// poll, merges the trace a process delivers and names the one that never does. The Kineto processes here are
// the test's own sockets speaking the protocol's bytes; tests/integration/kineto_torch_test.py runs real PyTorch.
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

namespace podscope {
namespace {

using testing::AgentProcess;
namespace fs = std::filesystem;
namespace ipc = kineto::ipc;
using tensorflow::profiler::XSpace;

podscope::v1::AgentStatus status_of(const AgentProcess& agent) {
  auto stub = podscope::v1::Agent::NewStub(agent.channel());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  podscope::v1::AgentStatus status;
  EXPECT_TRUE(stub->GetStatus(&context, podscope::v1::StatusRequest(), &status).ok());
  return status;
}

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

std::map<std::string, std::string> config_keys(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
    at = end + 1;
  }
  return out;
}

struct KinetoAgent {
  const testing::ScratchDirectory scratch{"agent_kineto"};
  const std::string dir = scratch.path();
  AgentProcess agent{{"--kineto_endpoint", dir + "/dynolog", "--host_name", "kineto-host"}};
};

TEST(AgentKineto, HostileDatagramsAreCountedAndDroppedWhileTheAgentServesOn) {
  KinetoAgent k;
  FakeKineto attacker(k.dir, "attacker");
  const std::string poll = ipc::encode_poll({3, 0, {4242, 1}});
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
        const auto s = status_of(k.agent);
        uint64_t counted = 0;
        for (const auto& r : s.kineto().refused()) counted += r.count();
        return counted >= total_sent;
      },
      std::chrono::seconds(20)));
  const podscope::v1::AgentStatus status = status_of(k.agent);
  for (const auto& [reason, n] : sent) EXPECT_EQ(refused(status, reason), n) << reason;
  EXPECT_EQ(status.kineto().polls(), 0u);
  EXPECT_FALSE(attacker.receive().has_value());
  std::optional<std::string> config = attacker.poll({4242, 1});
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

TEST(AgentKineto, ProcessesBeyondTheCapAreCountedNotKept) {
  KinetoAgent k;
  FakeKineto flood(k.dir, "flood");
  // Polls from more processes than the agent keeps; answers are not read, and some cannot be sent.
  const int32_t kProcesses = 4096 + 300;
  int32_t went = 0;
  for (int32_t pid = 1; pid <= kProcesses; ++pid) {
    while (!flood.send(ipc::encode_poll({3, 0, {100000 + pid}}))) {
      flood.drain();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ++went;
    if (pid % 64 == 0) flood.drain();
  }
  ASSERT_TRUE(testing::wait_for([&] { return status_of(k.agent).kineto().polls() == static_cast<uint64_t>(went); },
                                std::chrono::seconds(20)));
  const podscope::v1::AgentStatus status = status_of(k.agent);
  EXPECT_EQ(status.kineto().processes_size(), 4096);
  EXPECT_EQ(refused(status, "process_cap"), 300u);
}

TEST(AgentKineto, PollingProcessesAreListedInStatusAndMetrics) {
  KinetoAgent k;
  FakeKineto client(k.dir, "client");
  ASSERT_TRUE(client.poll({7001, 7000, 1}, 55).has_value());
  ASSERT_TRUE(client.poll({7001, 7000, 1}, 55).has_value());
  // A GPU process registers too: answered with an int32.
  ASSERT_TRUE(client.send(ipc::encode_registration({1, 7001, 55})));
  std::optional<std::string> registered = client.receive();
  ASSERT_TRUE(registered.has_value());
  EXPECT_EQ(registered->size(), ipc::kHeaderBytes + 4);
  EXPECT_EQ(registered->substr(8, 5), std::string("ctxt\0", 5));

  const podscope::v1::AgentStatus status = status_of(k.agent);
  EXPECT_EQ(status.kineto().state(), podscope::v1::KinetoStatus::SERVING);
  EXPECT_NE(status.kineto().detail().find(k.dir + "/dynolog"), std::string::npos);
  ASSERT_EQ(status.kineto().processes_size(), 1);
  const auto& p = status.kineto().processes(0);
  EXPECT_EQ(p.pid(), 7001);
  EXPECT_EQ(p.job_id(), 55);
  EXPECT_EQ(std::vector<int32_t>(p.ancestors().begin(), p.ancestors().end()), (std::vector<int32_t>{7000, 1}));
  EXPECT_EQ(p.gpu(), 1);
  EXPECT_GT(p.last_poll_ns(), 0);
  EXPECT_EQ(status.kineto().polls(), 2u);
  EXPECT_EQ(status.kineto().registrations(), 1u);

  ASSERT_TRUE(testing::wait_for(
      [&] {
        return testing::http_get(k.agent.metrics_port(), "/metrics")
                   .find(
                       "podscope_kineto_process_last_poll_seconds{host=\"kineto-host\",ancestors=\"7000,1\","
                       "job_id=\"55\",pid=\"7001\"}") != std::string::npos;
      },
      std::chrono::seconds(5)));
  EXPECT_NE(
      testing::http_get(k.agent.metrics_port(), "/metrics").find("podscope_kineto_processes{host=\"kineto-host\"} 1"),
      std::string::npos);
}

TEST(AgentKineto, ATakenEndpointIsReportedAndTheAgentGoesOn) {
  KinetoAgent first;
  AgentProcess second({"--kineto_endpoint", first.dir + "/dynolog"});
  const podscope::v1::AgentStatus status = status_of(second);
  EXPECT_EQ(status.kineto().state(), podscope::v1::KinetoStatus::UNAVAILABLE);
  EXPECT_NE(status.kineto().detail().find("taken"), std::string::npos) << status.kineto().detail();
  EXPECT_NE(second.output().find("kineto_endpoint"), std::string::npos);
  // The first still serves.
  FakeKineto client(first.dir, "client");
  EXPECT_TRUE(client.poll({9001}).has_value());
  EXPECT_EQ(status_of(first.agent).kineto().state(), podscope::v1::KinetoStatus::SERVING);
}

TEST(AgentKineto, AnEmptyEndpointTurnsItOff) {
  AgentProcess agent({"--kineto_endpoint", ""});
  const podscope::v1::AgentStatus status = status_of(agent);
  EXPECT_EQ(status.kineto().state(), podscope::v1::KinetoStatus::OFF);
}

// A Kineto process that polls every 200 ms and, when handed a trace request, writes the trace Kineto would
// (Chrome JSON, through ".tmp" and a rename) after the window, unless told to never deliver.
class PollingProcess {
 public:
  PollingProcess(const std::string& dir, int32_t pid, bool delivers)
      : client_(dir, "client" + std::to_string(pid)), pid_(pid), delivers_(delivers) {
    thread_ = std::thread([this] { run(); });
  }
  ~PollingProcess() {
    stop_ = true;
    thread_.join();
  }
  std::string config() {
    std::lock_guard lock(mu_);
    return config_;
  }

 private:
  void run() {
    while (!stop_) {
      std::optional<std::string> config = client_.poll({pid_, 1});
      if (config && !config->empty()) {
        {
          std::lock_guard lock(mu_);
          config_ = *config;
        }
        if (delivers_) deliver(config_keys(*config));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  void deliver(const std::map<std::string, std::string>& keys) {
    const int64_t start_ms = std::stoll(keys.at("PROFILE_START_TIME"));
    const int64_t duration_ms = std::stoll(keys.at("ACTIVITIES_DURATION_MSECS"));
    while (!stop_ && Clock().now_ns() / 1'000'000 < start_ms + duration_ms) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::string log_file = keys.at("ACTIVITIES_LOG_FILE");
    std::string pid_suffix = "_";
    pid_suffix += std::to_string(pid_);
    log_file.insert(log_file.find(".json"), pid_suffix);
    // Ten 10 ms ops from the window's start, on the host clock in µs since baseTimeNanoseconds.
    const int64_t base_ns = start_ms * 1'000'000 - 1'000'000'000;
    std::string events;
    for (int i = 0; i < 10; ++i) {
      if (!events.empty()) events += ",";
      events += R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": )" + std::to_string(pid_) +
                R"(, "tid": 1, "ts": )" + std::to_string(1'000'000 + i * 20'000) + R"(, "dur": 10000})";
    }
    const std::string trace =
        R"({"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": 3, "world_size": 4},
      "trace_id": ")" +
        keys.at("REQUEST_TRACE_ID") + R"(", "baseTimeNanoseconds": )" + std::to_string(base_ns) +
        R"(, "traceEvents": [)" + events + "]}";
    { std::ofstream(log_file + ".tmp") << trace; }
    fs::rename(log_file + ".tmp", log_file);
  }

  FakeKineto client_;
  int32_t pid_;
  bool delivers_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string config_;
  std::thread thread_;
};

TEST(AgentKineto, ACaptureRequestsEveryPollingProcessesTraceMergesTheDeliveredAndNamesTheMissing) {
  KinetoAgent k;
  PollingProcess delivering(k.dir, 51001, /*delivers=*/true);
  PollingProcess silent(k.dir, 51002, /*delivers=*/false);
  ASSERT_TRUE(
      testing::wait_for([&] { return status_of(k.agent).kineto().processes_size() == 2; }, std::chrono::seconds(10)));
  // Both have polled twice: the agent knows their interval.
  ASSERT_TRUE(testing::wait_for(
      [&] {
        const auto s = status_of(k.agent);
        for (const auto& p : s.kineto().processes()) {
          if (p.poll_interval_ms() == 0) return false;
        }
        return true;
      },
      std::chrono::seconds(10)));

  auto stub = tensorflow::ProfilerService::NewStub(k.agent.channel());
  tensorflow::ProfileRequest request;
  request.set_duration_ms(1000);
  request.set_emit_xspace(true);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  tensorflow::ProfileResponse response;
  const int64_t asked_ns = Clock().now_ns();
  ASSERT_TRUE(stub->Profile(&context, request, &response).ok());
  const XSpace& space = response.xspace();

  // Asked with no start: the agent started late enough for the next poll, and said so first.
  ASSERT_GT(space.warnings_size(), 0);
  EXPECT_EQ(space.warnings(0).rfind("capture started ", 0), 0u) << space.warnings(0);
  EXPECT_NE(space.warnings(0).find("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS"), std::string::npos);

  // Each process got the window: start in Unix ms, the duration, a file in the agent's directory under /tmp.
  const auto handed = config_keys(delivering.config());
  ASSERT_EQ(handed.count("PROFILE_START_TIME"), 1u) << delivering.config();
  EXPECT_EQ(handed.at("ACTIVITIES_DURATION_MSECS"), "1000");
  EXPECT_EQ(handed.at("ACTIVITIES_LOG_FILE").rfind("/tmp/podscope-kineto-", 0), 0u);
  EXPECT_EQ(config_keys(silent.config()).at("PROFILE_START_TIME"), handed.at("PROFILE_START_TIME"));
  const int64_t start_ms = std::stoll(handed.at("PROFILE_START_TIME"));
  EXPECT_GT(start_ms * 1'000'000, asked_ns + 2'000'000'000);  // poll interval + margin ahead
  const xspace::XPlaneReader host(*xspace::find_plane(space, xspace::kHostPlaneName));
  const auto capture_start = host.int_stat(xspace::kCaptureStartStat);
  ASSERT_TRUE(capture_start.has_value());
  // The window opens at a sampling pass once the planned start has come: late by the scheduler's delay only (a
  // loaded 2-core box's can reach seconds).
  EXPECT_GE(*capture_start / 1'000'000, start_ms);
  EXPECT_LT(*capture_start / 1'000'000, start_ms + 3000);

  // The delivered trace is merged: rank 3's ops on its own core, its file deleted.
  const tensorflow::profiler::XPlane* rank = xspace::find_plane(space, "/device:CUSTOM:3");
  ASSERT_NE(rank, nullptr);
  size_t events = 0;
  for (const auto& line : rank->lines()) events += static_cast<size_t>(line.events_size());
  EXPECT_EQ(events, 10u);
  EXPECT_FALSE(
      fs::exists(fs::path(handed.at("ACTIVITIES_LOG_FILE"))
                     .replace_filename(fs::path(handed.at("ACTIVITIES_LOG_FILE")).stem().string() + "_51001.json")));
  // The silent one is named, the rest kept.
  bool named = false;
  for (const auto& w : space.warnings())
    named |= w.find("Kineto process 51002 delivered no trace") != std::string::npos;
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace podscope

namespace podscope {
namespace {

TEST(AgentKineto, ACaptureCutShortAnswersAtOnceWithoutWaitingForTraces) {
  KinetoAgent k;
  PollingProcess silent(k.dir, 52001, /*delivers=*/false);
  ASSERT_TRUE(testing::wait_for(
      [&] {
        const auto s = status_of(k.agent);
        return s.kineto().processes_size() == 1 && s.kineto().processes(0).poll_interval_ms() > 0;
      },
      std::chrono::seconds(10)));
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
  ASSERT_TRUE(testing::wait_for([&] { return !silent.config().empty(); }, std::chrono::seconds(10)));
  const int64_t start_ms = std::stoll(config_keys(silent.config()).at("PROFILE_START_TIME"));
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
    named |= w.find("Kineto process 52001: the window was cut short") != std::string::npos;
  }
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace podscope
