// The Kineto handoff and `@dynolog` steering attacked for real, against the real podscope-agent binary, by real
// processes of other users (the test runs as root and drops to nobody's uid and to uids no account has): a local
// user plants links where a root rank writes; a rank delivers a symlink to a root-only file, a FIFO, a hard link to
// another user's file, a gzip bomb; pollers claim pid 1, the agent's own pid and 4,096 pids that are not theirs,
// ancestors they do not have, hundreds of places, a 14 s poll interval. Each does no harm now: it is refused,
// counted, and the capture and the agent go on. The agent is also run as the systemd unit runs it (an unprivileged
// user in its RuntimeDirectory) and as the DaemonSet does (root without capabilities, a read-only root file system,
// only the hostPath writable), and takes another user's trace in both.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/clock.h"
#include "kineto/ipc/fabric_endpoint.h"
#include "kineto/ipc/fabric_message.h"
#include "kineto/ipc/on_demand_config.h"
#include "podscope/v1/agent.grpc.pb.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"
#include "tensorflow/profiler_service.grpc.pb.h"
#include "tests/integration/agent_process.h"
#include "tests/integration/kineto_poller_process.h"
#include "tests/proto/xspace/xspace_contents.h"

namespace podscope {
namespace {

using testing::agent_status;
using testing::AgentProcess;
using testing::has_warning;
using testing::KinetoPoller;
using testing::warnings_of;
namespace fs = std::filesystem;
namespace ipc = kineto::ipc;
using tensorflow::profiler::XSpace;

uint64_t count_of(const google::protobuf::RepeatedPtrField<podscope::v1::KinetoStatus::Refusals>& counts,
                  const std::string& reason) {
  for (const auto& r : counts) {
    if (r.reason() == reason) return r.count();
  }
  ADD_FAILURE() << "no reason " << reason;
  return 0;
}

size_t events_on(const XSpace& space, const std::string& plane_name) {
  const tensorflow::profiler::XPlane* plane = xspace::find_plane(space, plane_name);
  size_t events = 0;
  if (plane != nullptr) {
    for (const auto& line : plane->lines()) events += static_cast<size_t>(line.events_size());
  }
  return events;
}

// A Kineto trace of rank `rank`: what a root-only file holds in the attacks that would have the agent read it.
std::string trace_of_rank(int rank) {
  const int64_t now_us = Clock().now_ns() / 1000;
  return R"({"distributedInfo": {"rank": )" + std::to_string(rank) +
         R"(}, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "secret", "pid": 1, "tid": 1, "ts": )" +
         std::to_string(now_us) + R"(, "dur": 10}]})";
}

// An agent whose Kineto endpoint is a socket file in `sockets` (any user may bind its own end there, as in a
// KINETO_IPC_SOCKET_DIR) and whose trace directories lie under `trace_root`.
struct HandoffAgent {
  explicit HandoffAgent(std::vector<std::string> extra = {}, testing::AgentEnvironment environment = {},
                        std::string trace_root_under = "run")
      : trace_root(dir + "/" + trace_root_under + "/kineto"),
        agent(arguments(std::move(extra), trace_root_under), true, std::move(environment)) {}

  std::vector<std::string> arguments(std::vector<std::string> extra, const std::string& under) {
    fs::permissions(dir, fs::perms(0755));
    fs::create_directories(sockets);
    fs::permissions(sockets, fs::perms(01777));
    fs::create_directories(dir + "/" + under);
    std::vector<std::string> args = {"--kineto_endpoint", sockets + "/dynolog", "--kineto_trace_dir",
                                     trace_root,          "--host_name",        "handoff-host"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  // A Profile of `duration_ms`, the XSpace answered.
  XSpace profile(int duration_ms = 1000) const {
    const testing::ProfileOutcome out =
        testing::profile(agent, testing::profile_request(duration_ms), std::chrono::seconds(90));
    EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    return out.response.xspace();
  }

  // Waits until `processes` are known and each has polled twice.
  void wait_for_pollers(int processes) const {
    ASSERT_TRUE(
        testing::wait_for([&] { return testing::kineto_pollers_known(agent, processes); }, std::chrono::seconds(20)))
        << agent_status(agent).DebugString();
  }

  const testing::ScratchDirectory scratch{"kineto_handoff"};
  const std::string dir = scratch.path();
  const std::string sockets = dir + "/sockets";
  const std::string trace_root;
  AgentProcess agent;
};

// A root-only file (0600) holding a trace: what the attacks would have the agent or a root rank reach.
std::string root_only_file(const std::string& dir, const std::string& content) {
  const std::string path = dir + "/root-only.json";
  { std::ofstream(path) << content; }
  fs::permissions(path, fs::perms(0600));
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void require_root() {
  if (::geteuid() != 0) GTEST_SKIP() << "acting as other local users needs root (the tests drop to their uids)";
}

// Once the rank has polled twice, a 1 s capture merges its trace (10 events on its Kineto device).
void expect_a_capture_merges_the_ranks_trace(const AgentProcess& agent) {
  ASSERT_TRUE(testing::wait_for([&] { return testing::kineto_pollers_known(agent, 1); }, std::chrono::seconds(20)));
  const testing::ProfileOutcome out = testing::profile(agent, testing::profile_request(1000), std::chrono::seconds(60));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(events_on(out.response.xspace(), "/device:CUSTOM:3"), 10u) << warnings_of(out.response.xspace());
}

TEST(KinetoHandoff, AnotherUserCannotPlantALinkWhereARootRankWrites) {
  require_root();
  HandoffAgent k;
  const std::string victim = root_only_file(k.dir, "root's secret\n");
  KinetoPoller rank(k.sockets, {});  // a root rank, as in the attack
  k.wait_for_pollers(1);
  std::optional<XSpace> space;
  std::thread profile([&] { space = k.profile(); });
  ASSERT_TRUE(testing::wait_for([&] { return !rank.handed().empty(); }, std::chrono::seconds(20)));
  // The handed file lies in root's own directory: the attacker can neither plant there nor in the root, nor list.
  const std::string log_file = rank.handed()[0].log_file;
  const std::string delivered = ipc::delivered_trace_path(log_file, rank.pid());
  EXPECT_EQ(fs::path(log_file).parent_path(), fs::path(k.trace_root) / "0");
  EXPECT_EQ(testing::run_as(testing::kAttacker,
                            [&] { return ::symlink(victim.c_str(), (delivered + ".tmp").c_str()) == 0 ? 0 : errno; }),
            EACCES);
  EXPECT_EQ(testing::run_as(testing::kAttacker,
                            [&] { return ::mkfifo((delivered + ".tmp").c_str(), 0666) == 0 ? 0 : errno; }),
            EACCES);
  EXPECT_EQ(testing::run_as(testing::kAttacker,
                            [&] {
                              const int fd = ::open((k.trace_root + "/4242").c_str(), O_CREAT | O_WRONLY, 0666);
                              return fd >= 0 ? 0 : errno;
                            }),
            EACCES);
  EXPECT_EQ(testing::run_as(testing::kAttacker,
                            [&] {
                              DIR* d = ::opendir(k.trace_root.c_str());
                              return d != nullptr ? 0 : errno;
                            }),
            EACCES);
  profile.join();
  ASSERT_TRUE(space.has_value());
  EXPECT_EQ(events_on(*space, "/device:CUSTOM:3"), 10u) << warnings_of(*space);
  EXPECT_EQ(read_file(victim), "root's secret\n");
}

TEST(KinetoHandoff, ADeliveredSymlinkIsRefusedNotFollowed) {
  require_root();
  HandoffAgent k;
  const std::string victim = root_only_file(k.dir, trace_of_rank(7));
  KinetoPoller rank(k.sockets, {"--deliver", "symlink:" + victim}, testing::kNobody);
  k.wait_for_pollers(1);
  for (int capture = 0; capture < 3; ++capture) {
    const XSpace space = k.profile();
    EXPECT_EQ(xspace::find_plane(space, "/device:CUSTOM:7"), nullptr);
    EXPECT_TRUE(has_warning(space, "is a symbolic link; not taken")) << warnings_of(space);
  }
  const auto status = agent_status(k.agent);
  EXPECT_EQ(count_of(status.kineto().traces_refused(), "symlink"), 3u);
  EXPECT_EQ(status.kineto().traces_merged(), 0u);
  EXPECT_NE(testing::http_get(k.agent.metrics_port(), "/metrics")
                .find("podscope_kineto_traces_refused_total{host=\"handoff-host\",reason=\"symlink\"} 3"),
            std::string::npos);
}

TEST(KinetoHandoff, ADeliveredFifoNeitherHangsTheCaptureNorTheNextNorTheStop) {
  require_root();
  auto k = std::make_unique<HandoffAgent>();
  KinetoPoller rank(k->sockets, {"--deliver", "fifo"}, testing::kNobody);
  k->wait_for_pollers(1);
  for (int capture = 0; capture < 2; ++capture) {
    const auto asked = std::chrono::steady_clock::now();
    const XSpace space = k->profile();
    // The lead (a poll interval + 2 s), the window, and no wait past the FIFO's appearance.
    EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(8));
    EXPECT_TRUE(has_warning(space, "is not a regular file; not taken")) << warnings_of(space);
  }
  EXPECT_EQ(count_of(agent_status(k->agent).kineto().traces_refused(), "not_regular_file"), 2u);
  const auto stopping = std::chrono::steady_clock::now();
  k.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(5));
}

TEST(KinetoHandoff, AHardLinkToAnotherUsersFileIsRefused) {
  require_root();
  HandoffAgent k;
  const std::string victim = root_only_file(k.dir, trace_of_rank(7));
  KinetoPoller rank(k.sockets, {"--deliver", "hardlink:" + victim}, testing::kNobody);
  k.wait_for_pollers(1);
  const XSpace space = k.profile();
  EXPECT_EQ(xspace::find_plane(space, "/device:CUSTOM:7"), nullptr);
  if (read_file("/proc/sys/fs/protected_hardlinks").starts_with("1")) {
    // fs.protected_hardlinks: the kernel refuses the link itself, and nothing is delivered.
    EXPECT_TRUE(has_warning(space, "delivered no trace")) << warnings_of(space);
  } else {
    EXPECT_TRUE(has_warning(space, "belongs to uid 0, not the process's uid 65534")) << warnings_of(space);
    EXPECT_EQ(count_of(agent_status(k.agent).kineto().traces_refused(), "wrong_owner"), 1u);
  }
}

TEST(KinetoHandoff, AGzipBombIsRefusedAloudWithinTheCapturesBudget) {
  require_root();
  HandoffAgent k({"--capture_memory_limit_mb", "64"});
  // 1 GiB of one event repeated, in a gzip of about a megabyte.
  KinetoPoller rank(k.sockets, {"--deliver", "gzip_bomb:1024"}, testing::kNobody);
  k.wait_for_pollers(1);
  testing::reset_peak_rss(k.agent.pid());
  const int64_t before_kib = testing::status_kib(k.agent.pid(), "VmRSS");
  const XSpace space = k.profile();
  const int64_t peak_kib = testing::status_kib(k.agent.pid(), "VmHWM");
  std::printf("agent RSS %lld KiB before the capture, peak %lld KiB with the gzip bomb\n",
              static_cast<long long>(before_kib), static_cast<long long>(peak_kib));
  EXPECT_TRUE(has_warning(space, "-byte bound")) << warnings_of(space);
  EXPECT_TRUE(has_warning(space, "capture_memory_limit_mb")) << warnings_of(space);
  EXPECT_EQ(count_of(agent_status(k.agent).kineto().traces_refused(), "too_large"), 1u);
  // The capture's 64 MiB and what the agent held before, not the bomb's gigabyte.
  EXPECT_LT(peak_kib - before_kib, 96 * 1024);
}

TEST(KinetoHandoff, ForgedPollsAreDroppedWhateverPidTheyClaimAndLockNoOneOut) {
  require_root();
  HandoffAgent k;
  // The test's own socket: the kernel names this process, whatever the payload says.
  const ipc::FabricAddress own = *ipc::fabric_address(k.sockets + "/forger");
  const ipc::FabricAddress agent_address = *ipc::fabric_address(k.sockets + "/dynolog");
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&own.address), own.length), 0);
  auto send = [&](const std::string& bytes) {
    while (::sendto(fd, bytes.data(), bytes.size(), MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&agent_address),
                    agent_address.length) != static_cast<ssize_t>(bytes.size())) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  uint64_t forged = 0;
  for (int32_t pid : {1, static_cast<int32_t>(k.agent.pid())}) {
    send(ipc::encode_poll({3, 0, {pid}}));
    send(ipc::encode_registration({0, pid, 0}));
    forged += 2;
  }
  for (int32_t i = 0; i < 4096; ++i) {
    send(ipc::encode_poll({3, 0, {200'000 + i}}));
    ++forged;
  }
  ASSERT_TRUE(
      testing::wait_for([&] { return count_of(agent_status(k.agent).kineto().refused(), "forged_pid") == forged; },
                        std::chrono::seconds(30)));
  ::close(fd);
  auto status = agent_status(k.agent);
  EXPECT_EQ(status.kineto().processes_size(), 0);
  EXPECT_EQ(status.kineto().polls(), 0u);
  const std::string metrics = testing::http_get(k.agent.metrics_port(), "/metrics");
  std::printf("/metrics: %zu bytes after %llu forged polls\n", metrics.size(), static_cast<unsigned long long>(forged));
  EXPECT_EQ(metrics.find("pid=\""), std::string::npos);
  EXPECT_LT(metrics.size(), size_t{256} << 10);
  // A real rank is known and traced at once.
  KinetoPoller rank(k.sockets, {}, testing::kNobody);
  k.wait_for_pollers(1);
  EXPECT_EQ(agent_status(k.agent).kineto().processes(0).pid(), rank.pid());
  EXPECT_EQ(events_on(k.profile(), "/device:CUSTOM:3"), 10u);
}

TEST(KinetoHandoff, AForgedAncestorIsDroppedAndCannotMakeARankALauncher) {
  require_root();
  HandoffAgent k;
  KinetoPoller rank(k.sockets, {}, testing::kNobody);
  k.wait_for_pollers(1);
  // Another user's process claims the rank as its ancestor: were it believed, the rank would be a launcher and not
  // traced.
  KinetoPoller liar(k.sockets, {"--claim_ancestors", std::to_string(rank.pid())}, testing::kAttacker);
  ASSERT_TRUE(
      testing::wait_for([&] { return count_of(agent_status(k.agent).kineto().refused(), "forged_ancestor") >= 2; },
                        std::chrono::seconds(10)));
  const auto status = agent_status(k.agent);
  ASSERT_EQ(status.kineto().processes_size(), 1);
  EXPECT_EQ(status.kineto().processes(0).pid(), rank.pid());
  EXPECT_EQ(events_on(k.profile(), "/device:CUSTOM:3"), 10u);
}

TEST(KinetoHandoff, OneUsersProcessesTakeAtMostTheirShareAndMetricsStayBounded) {
  require_root();
  HandoffAgent k;
  // 300 real processes of one user, each polling every second.
  KinetoPoller crowd(k.sockets, {"--children", "299", "--interval_ms", "1000"}, testing::kAttacker);
  ASSERT_TRUE(testing::wait_for(
      [&] {
        const auto s = agent_status(k.agent);
        return s.kineto().processes_size() == 256 && count_of(s.kineto().refused(), "uid_cap") >= 44;
      },
      std::chrono::seconds(30)))
      << agent_status(k.agent).kineto().processes_size();
  // Another user's rank still gets in.
  KinetoPoller rank(k.sockets, {}, testing::kNobody);
  ASSERT_TRUE(testing::wait_for(
      [&] {
        const auto status = agent_status(k.agent);
        for (const auto& p : status.kineto().processes()) {
          if (p.pid() == rank.pid()) return true;
        }
        return false;
      },
      std::chrono::seconds(10)));
  std::string metrics;
  EXPECT_TRUE(testing::wait_for(
      [&] {
        metrics = testing::http_get(k.agent.metrics_port(), "/metrics");
        return metrics.find("podscope_kineto_processes{host=\"handoff-host\"} 257") != std::string::npos;
      },
      std::chrono::seconds(10)));
  std::printf("/metrics: %zu bytes with 257 processes polling\n", metrics.size());
  EXPECT_EQ(metrics.find("pid=\""), std::string::npos);
}

TEST(KinetoHandoff, APollerCannotPushACapturesStartBeyondTheBound) {
  require_root();
  HandoffAgent k;
  KinetoPoller slow(k.sockets, {"--interval_ms", "14000"}, testing::kAttacker);
  ASSERT_TRUE(testing::wait_for(
      [&] {
        const auto s = agent_status(k.agent);
        return s.kineto().processes_size() == 1 && s.kineto().processes(0).poll_interval_ms() >= 13000;
      },
      std::chrono::seconds(30)));
  auto stub = podscope::v1::Agent::NewStub(k.agent.channel());
  grpc::ClientContext context;
  podscope::v1::PingRequest request;
  podscope::v1::PingResponse response;
  ASSERT_TRUE(stub->Ping(&context, request, &response).ok());
  // At most the bound (10 s) plus Kineto's 2 s to apply a request, whatever the poller's 14 s.
  EXPECT_EQ(response.capture_start_lead_ms(), 12000);
  EXPECT_NE(response.capture_start_lead_reason().find("every 10.0 s or more here (a process polling less often is "
                                                      "not waited for"),
            std::string::npos)
      << response.capture_start_lead_reason();
}

// The systemd unit: the agent as its own unprivileged user (User=podscope), /run/podscope its RuntimeDirectory
// (mode 0751); a rank of another user with a private umask delivers, and the agent reads it through the ACL alone.
TEST(KinetoHandoff, UnderTheSystemdUnitAnUnprivilegedAgentTakesAnotherUsersTrace) {
  require_root();
  constexpr uid_t kAgentUid = 4300;
  testing::AgentEnvironment unit;
  unit.uid = kAgentUid;
  unit.gid = kAgentUid;
  const testing::ScratchDirectory run("kineto_systemd");
  fs::permissions(run.path(), fs::perms(0755));
  const std::string runtime_directory = run.file("podscope");
  fs::create_directory(runtime_directory);
  ASSERT_EQ(::chown(runtime_directory.c_str(), kAgentUid, kAgentUid), 0);
  fs::permissions(runtime_directory, fs::perms(0751));
  // Kineto's default endpoint, an abstract name (the agent shares the host's network namespace); a unique one here.
  const std::string endpoint = "podscope-test-systemd-" + std::to_string(::getpid());
  AgentProcess agent({"--kineto_endpoint", endpoint, "--kineto_trace_dir", runtime_directory + "/kineto", "--socket",
                      runtime_directory + "/agent.sock"},
                     true, unit);
  testing::Identity rank_user = testing::kNobody;
  rank_user.umask = 077;
  KinetoPoller rank("@" + endpoint, {}, rank_user);
  expect_a_capture_merges_the_ranks_trace(agent);
  struct stat st {};
  ASSERT_EQ(::stat((runtime_directory + "/kineto/65534").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kAgentUid);
}

// The DaemonSet: root without any capability, a read-only root file system (no writable /tmp), only the hostPath
// /run/podscope writable; a rank of another user delivers into it.
TEST(KinetoHandoff, InTheDaemonSetARootAgentWithoutCapabilitiesOnAReadOnlyRootTakesTraces) {
  require_root();
  const testing::ScratchDirectory node("kineto_daemonset");
  fs::permissions(node.path(), fs::perms(0755));
  const std::string host_path = node.file("run-podscope");  // hostPath DirectoryOrCreate: root's, 0755
  fs::create_directory(host_path);
  fs::permissions(host_path, fs::perms(0755));
  testing::AgentEnvironment pod;
  pod.read_only_root = true;
  pod.writable_paths = {host_path};
  pod.no_capabilities = true;
  // hostNetwork: Kineto's default abstract endpoint reaches it (a unique name here).
  const std::string endpoint = "podscope-test-daemonset-" + std::to_string(::getpid());
  AgentProcess agent({"--kineto_endpoint", endpoint, "--kineto_trace_dir", host_path + "/kineto", "--socket",
                      host_path + "/agent.sock"},
                     true, pod);
  // The agent's / is read-only, and it holds no capability.
  const std::string mounts = read_file("/proc/" + std::to_string(agent.pid()) + "/mountinfo");
  bool root_read_only = false;
  std::istringstream lines(mounts);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, mount_point, options;
    fields >> id >> parent >> device >> root >> mount_point >> options;
    if (mount_point == "/") root_read_only = options.starts_with("ro");
  }
  EXPECT_TRUE(root_read_only) << mounts;
  EXPECT_NE(read_file("/proc/" + std::to_string(agent.pid()) + "/status").find("CapEff:\t0000000000000000"),
            std::string::npos);
  KinetoPoller rank("@" + endpoint, {}, testing::kNobody);
  expect_a_capture_merges_the_ranks_trace(agent);
}

}  // namespace
}  // namespace podscope
