// TensorBoard's worker-list capture against real podscope-agent binaries: the bytes TensorFlow's client sends
// (tensorflow.ProfileAnalysis/NewSession to the first worker, every worker a host), the pod run it starts, and the
// agent refusing to become a proxy to addresses outside allowed_fanout_targets; over mutual TLS, the agent dialling
// the workers with its own identity and allowed_clients deciding who may start it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tensorflow/profiler_analysis.pb.h"
#include "tests/integration/agent_process.h"
#include "tests/integration/tensorflow_client_wire.h"
#include "tests/pod_capture/silent_hosts.h"
#include "tls/credentials.h"

namespace podscope {
namespace {

using testing::AgentProcess;
namespace fs = std::filesystem;

constexpr char kNewSession[] = "/tensorflow.ProfileAnalysis/NewSession";

struct NewSessionOutcome {
  grpc::Status status;
  tensorflow::NewProfileSessionResponse response;
};

NewSessionOutcome new_session(const AgentProcess& agent, const testing::TfCapture& capture,
                              const std::vector<std::string>& hosts) {
  testing::RawReply reply =
      testing::call_with_bytes(agent.channel(), kNewSession, testing::tf_new_session_request(capture, hosts), 60);
  NewSessionOutcome out{reply.status, {}};
  if (reply.status.ok()) {
    EXPECT_TRUE(out.response.ParseFromString(reply.bytes));
  }
  return out;
}

// What a refused fan-out leaves: no connection to `bystander` (an address inside the agent's network a client must
// not reach through it) and nothing under `root`.
void expect_nothing_dialled_or_written(const testing::NeverAcceptingListener& bystander, const std::string& root) {
  EXPECT_FALSE(bystander.contacted(std::chrono::milliseconds(300))) << "the agent dialled a refused address";
  EXPECT_TRUE(fs::is_empty(root));
}

// The agent (host worker-0) counted `refusals` refused fan-outs.
void expect_refusals_counted(const AgentProcess& agent, int refusals) {
  const std::string metrics = testing::http_get(agent.metrics_port(), "/metrics");
  EXPECT_NE(metrics.find("podscope_fanout_refused_total{host=\"worker-0\"} " + std::to_string(refusals)),
            std::string::npos)
      << metrics;
}

TEST(AgentNewSession, TensorBoardsWorkerListCaptureOnAnAgentCapturesEveryListedWorkerIntoOneRun) {
  const testing::ScratchDirectory scratch("agent_new_session");
  const std::string root = scratch.path();
  // Two agents on the same port, as a pod's agents are (127.0.0.2 is loopback too): the default
  // allowed_fanout_targets, any host on the agent's own port, lets the first reach the second.
  AgentProcess first({"--repository_root", root, "--host_name", "worker-0", "--sample_interval_ms", "50"});
  const std::string port = std::to_string(first.grpc_port());
  AgentProcess second({"--listen", "127.0.0.2:" + port, "--host_name", "worker-1", "--sample_interval_ms", "50"});
  const testing::TfCapture capture = testing::tf_capture(300, root + "/plugins/profile", "pod_run");

  const NewSessionOutcome out = new_session(first, capture, {"127.0.0.1:" + port, "127.0.0.2:" + port});
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_FALSE(out.response.empty_trace());
  EXPECT_EQ(out.response.error_message(), "");
  const fs::path run = fs::path(root) / "plugins/profile/pod_run";
  for (const std::string& file :
       {"127.0.0.1_" + port + ".xplane.pb", "127.0.0.2_" + port + ".xplane.pb", std::string("capture.json"),
        std::string("pod.trace.json.gz"), std::string("pod_summary.txt")}) {
    EXPECT_TRUE(fs::exists(run / file)) << file;
  }
  // The run is the only thing written: the agent's own capture came back to the pod run, not into a file of its own.
  for (const fs::path& dir : {fs::path(root), fs::path(root) / "plugins", run.parent_path()}) {
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << dir;
  }
  for (const auto& entry : fs::directory_iterator(run)) {
    EXPECT_TRUE(entry.is_regular_file()) << entry.path();
    EXPECT_EQ(entry.path().filename().string().find("worker-0"), std::string::npos) << entry.path();
  }

  // The same session id again: a run directory of its own, the first one kept.
  ASSERT_TRUE(new_session(first, capture, {"127.0.0.1:" + port}).status.ok());
  EXPECT_TRUE(fs::exists(fs::path(root) / ("plugins/profile/pod_run_1/127.0.0.1_" + port + ".xplane.pb")));
}

TEST(AgentNewSession, AHostOutsideAllowedFanoutTargetsIsRefusedWithNothingContactedAndCounted) {
  const testing::ScratchDirectory scratch("agent_new_session");
  const std::string root = scratch.path();
  AgentProcess agent({"--repository_root", root, "--host_name", "worker-0"});
  const std::string self = "127.0.0.1:" + std::to_string(agent.grpc_port());
  const testing::NeverAcceptingListener bystander;
  const std::string elsewhere = "127.0.0.1:" + std::to_string(bystander.port());
  const testing::TfCapture capture = testing::tf_capture(100, root, "attack");

  for (const std::string& target : {elsewhere, "grpc://" + elsewhere}) {
    const NewSessionOutcome out = new_session(agent, capture, {self, target});
    EXPECT_EQ(out.status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << target;
    EXPECT_NE(out.status.error_message().find(elsewhere), std::string::npos) << out.status.error_message();
    EXPECT_NE(out.status.error_message().find("allowed_fanout_targets"), std::string::npos);
  }
  // A host that would become a file name outside the run directory is no address at all.
  EXPECT_EQ(new_session(agent, capture, {"../../escape:" + std::to_string(agent.grpc_port())}).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  expect_nothing_dialled_or_written(bystander, root);
  expect_refusals_counted(agent, 2);
}

TEST(AgentNewSession, GrpcTargetSchemesAreNoHostsAndNothingIsDialled) {
  const testing::ScratchDirectory scratch("agent_new_session");
  const std::string root = scratch.path();
  AgentProcess agent({"--repository_root", root, "--allowed_fanout_targets", "127.0.0.*:*"});
  const testing::NeverAcceptingListener bystander;
  const std::string port = std::to_string(bystander.port());
  const testing::TfCapture capture = testing::tf_capture(100, root, "schemes");
  for (const std::string& target :
       {"ipv4:127.0.0.1:" + port, "dns:///127.0.0.1:" + port, "dns:127.0.0.1:" + port,
        "unix:" + agent.socket_dir() + "/agent.sock", std::string("unix-abstract:podscope")}) {
    const NewSessionOutcome out = new_session(agent, capture, {agent.grpc_address(), target});
    EXPECT_EQ(out.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << target;
    EXPECT_NE(out.status.error_message().find("not a host:port address"), std::string::npos)
        << out.status.error_message();
  }
  expect_nothing_dialled_or_written(bystander, root);
}

TEST(AgentNewSession, ANameIsJudgedByTheAddressItResolvesToNotByItsText) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the agent gets its own /etc/hosts in a mount namespace";
  const testing::ScratchDirectory scratch("agent_new_session");
  const std::string root = scratch.path();
  // 127.0.0.evil.example reads like the allowed 127.0.0.* but leads to 127.0.1.1, outside it.
  const std::string hosts = root + "/hosts";
  std::ofstream(hosts) << "127.0.0.1 localhost\n127.0.1.1 127.0.0.evil.example\n127.0.0.2 inside.example\n";
  const testing::NeverAcceptingListener outside("127.0.1.1");
  testing::AgentEnvironment resolving;
  resolving.hosts_file = hosts;
  AgentProcess agent({"--repository_root", root, "--allowed_fanout_targets", "127.0.0.*:*"}, true, resolving);
  const std::string port = std::to_string(agent.grpc_port());
  AgentProcess inside({"--listen", "127.0.0.2:" + port, "--host_name", "inside"});
  const testing::TfCapture capture = testing::tf_capture(200, root, "names");

  const NewSessionOutcome refused =
      new_session(agent, capture, {"127.0.0.evil.example:" + std::to_string(outside.port())});
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.status.error_message();
  EXPECT_FALSE(outside.contacted(std::chrono::milliseconds(300))) << "the agent dialled a name outside the patterns";

  // A name that leads inside the patterns is captured, and its files carry the name the request gave.
  const NewSessionOutcome out = new_session(agent, capture, {"inside.example:" + port});
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_FALSE(out.response.empty_trace()) << out.response.error_message();
  EXPECT_TRUE(fs::exists(fs::path(root) / "names" / ("inside.example_" + port + ".xplane.pb")));
}

TEST(AgentNewSession, AHostListLongerThanMaxFanoutHostsIsRefusedAtOnceWithNothingContacted) {
  const testing::ScratchDirectory scratch("agent_new_session");
  const std::string root = scratch.path();
  AgentProcess agent({"--repository_root", root, "--host_name", "worker-0"});
  const testing::NeverAcceptingListener bystander;
  const std::string target = "127.0.0.1:" + std::to_string(bystander.port());
  const testing::TfCapture capture = testing::tf_capture(100, root, "many");
  // 20,000 hosts against the default bound of 4096: refused before anything is resolved or dialled.
  const std::vector<std::string> many(20'000, target);
  const auto start = std::chrono::steady_clock::now();
  const NewSessionOutcome out = new_session(agent, capture, many);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << out.status.error_message();
  EXPECT_NE(out.status.error_message().find("max_fanout_hosts (4096)"), std::string::npos)
      << out.status.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  expect_nothing_dialled_or_written(bystander, root);
  expect_refusals_counted(agent, 1);
}

TEST(AgentNewSession, TwoThousandHostsThatNeverAnswerHoldTheAgentSecondsAndAStopIsPrompt) {
  // Before, each such host cost the opening clock-sync burst a ping timeout, eight at a time: a NewSession of 2,000
  // allowed hosts that never answer held the agent 184 s, and a SIGTERM meanwhile waited 122 s (the unit's
  // TimeoutStopSec is 10 s). Now every host is pinged once, all at once, within 1 s + 5 ms a host.
  constexpr int kHosts = 2000;
  const testing::ScratchDirectory scratch("agent_new_session");
  const std::string root = scratch.path();
  const testing::SilentHosts silent;
  AgentProcess agent({"--repository_root", root, "--host_name", "worker-0", "--allowed_fanout_targets",
                      "127.1.*:" + std::to_string(silent.port())});
  const testing::TfCapture capture = testing::tf_capture(100, root, "silent");
  const auto start = std::chrono::steady_clock::now();
  const NewSessionOutcome out = new_session(agent, capture, silent.hosts(kHosts));
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_TRUE(out.response.empty_trace());
  EXPECT_NE(out.response.error_message().find("not asked to capture: unreachable at the clock sync"),
            std::string::npos);

  // Another, stopped as systemd stops the unit while it waits.
  std::thread caller([&] { new_session(agent, testing::tf_capture(100, root, "stopped"), silent.hosts(kHosts)); });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto stopping = std::chrono::steady_clock::now();
  agent.signal(SIGTERM);
  const std::optional<int> exited = agent.wait_exit(std::chrono::seconds(60));
  const double stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopping).count();
  caller.join();
  std::printf(
      "NewSession of %d hosts that never answer: answered in %.1f s; SIGTERM during another: exited in %.1f s\n",
      kHosts, took_s, stop_s);
  ASSERT_TRUE(exited.has_value()) << agent.output();
  EXPECT_LT(took_s, 60);
  EXPECT_LT(stop_s, 10) << "the unit's TimeoutStopSec";
  EXPECT_FALSE(fs::exists(fs::path(root) / "stopped")) << "a stopped run leaves nothing";
}

TEST(AgentNewSession, AllowedFanoutTargetsPatternsOpenOtherPorts) {
  const testing::ScratchDirectory scratch("agent_new_session");
  const std::string root = scratch.path();
  AgentProcess other({"--host_name", "worker-1"});
  AgentProcess agent({"--repository_root", root, "--allowed_fanout_targets", "127.0.0.*:*"});
  const testing::TfCapture capture = testing::tf_capture(100, root, "two_ports");
  const NewSessionOutcome out = new_session(agent, capture, {agent.grpc_address(), other.grpc_address()});
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_FALSE(out.response.empty_trace());
  EXPECT_TRUE(
      fs::exists(fs::path(root) / "two_ports" / ("127.0.0.1_" + std::to_string(other.grpc_port()) + ".xplane.pb")));
}

TEST(AgentNewSession, WithoutARepositoryRootTheAnswerSaysHowToEnableIt) {
  AgentProcess agent({});
  const testing::TfCapture capture = testing::tf_capture(100, "/tmp/logdir/plugins/profile", "no_root");
  const NewSessionOutcome out = new_session(agent, capture, {agent.grpc_address()});
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_TRUE(out.response.empty_trace());
  EXPECT_NE(out.response.error_message().find("--repository_root"), std::string::npos) << out.response.error_message();
  EXPECT_FALSE(fs::exists("/tmp/logdir/plugins/profile/no_root"));
}

TEST(AgentNewSession, AnAllowedFanoutTargetThatIsNoHostPortPatternExitsTwo) {
  AgentProcess agent({"--allowed_fanout_targets", "8466"}, /*wait_ready=*/false);
  const std::optional<int> status = agent.wait_exit(std::chrono::seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(WEXITSTATUS(*status), 2) << agent.output();
  EXPECT_NE(agent.output().find("allowed_fanout_targets"), std::string::npos) << agent.output();
}

}  // namespace
}  // namespace podscope

namespace podscope {
namespace {

// Whether the agent printed a line matching `pattern` within 10 s.
bool wait_for_output(AgentProcess& agent, const std::regex& pattern) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!std::regex_search(agent.output(), pattern)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    agent.read_some(100);
  }
  return true;
}

// A channel to `agent` presenting the test certificate `name` (tests/integration/test_certs.py).
std::shared_ptr<grpc::Channel> tls_channel(const AgentProcess& agent, const fs::path& certs, const std::string& name) {
  tls::TlsConfig client{.cert = (certs / (name + ".pem")).string(),
                        .key = (certs / (name + ".key")).string(),
                        .ca = (certs / "ca.pem").string()};
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(INT_MAX);
  return grpc::CreateCustomChannel(agent.grpc_address(), tls::channel_credentials(client), args);
}

// Test certificates and the TLS flags of an agent that allows `allowed_clients`.
std::vector<std::string> tls_agent_args(const fs::path& certs, const std::string& allowed_clients) {
  return {"--tls_cert",
          (certs / "server.pem").string(),
          "--tls_key",
          (certs / "server.key").string(),
          "--tls_client_ca",
          (certs / "ca.pem").string(),
          "--allowed_clients",
          allowed_clients,
          "--allowed_fanout_targets",
          "127.0.0.1:*"};
}

// The test certificates under `root` (tests/integration/test_certs.py).
std::string make_certs(const std::string& root) {
  const fs::path certs = fs::path(root) / "certs";
  const std::string make = "python3 " PODSCOPE_SOURCE_DIR "/tests/integration/test_certs.py " + certs.string();
  EXPECT_EQ(std::system(make.c_str()), 0) << make;
  return certs.string();
}

TEST(AgentNewSession, OverMutualTlsTheAgentCapturesTheOtherWorkersWithItsOwnIdentity) {
  const testing::ScratchDirectory scratch("agent_new_session");
  const std::string root = scratch.path();
  const fs::path certs = make_certs(root);
  // The workers allow the CLI's name and the agents' own: the first captures the second with its identity.
  const std::vector<std::string> tls_args = tls_agent_args(certs, "cli.podscope.test,agent.podscope.test");
  std::vector<std::string> first_args = {"--repository_root", root, "--host_name", "worker-0"};
  first_args.insert(first_args.end(), tls_args.begin(), tls_args.end());
  std::vector<std::string> second_args = {"--host_name", "worker-1"};
  second_args.insert(second_args.end(), tls_args.begin(), tls_args.end());
  AgentProcess first(first_args);
  AgentProcess second(second_args);
  const testing::TfCapture capture = testing::tf_capture(200, root + "/plugins/profile", "tls_run");
  const std::string request = testing::tf_new_session_request(capture, {first.grpc_address(), second.grpc_address()});

  const testing::RawReply refused =
      testing::call_with_bytes(tls_channel(first, certs, "intruder"), kNewSession, request, 60);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.status.error_message();
  EXPECT_NE(refused.status.error_message().find("intruder.podscope.test"), std::string::npos);

  const testing::RawReply reply = testing::call_with_bytes(tls_channel(first, certs, "cli"), kNewSession, request, 60);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  tensorflow::NewProfileSessionResponse response;
  ASSERT_TRUE(response.ParseFromString(reply.bytes));
  EXPECT_EQ(response.error_message(), "");
  const fs::path run = fs::path(root) / "plugins/profile/tls_run";
  for (const AgentProcess* worker : {&first, &second}) {
    const std::string file = "127.0.0.1_" + std::to_string(worker->grpc_port()) + ".xplane.pb";
    EXPECT_TRUE(fs::exists(run / file)) << file;
  }
  // The worker's audit line names who asked, and through which agent.
  EXPECT_TRUE(
      wait_for_output(second, std::regex("audit: Profile by cli\\.podscope\\.test via \\S*agent\\.podscope\\.test")))
      << second.output();
}

TEST(AgentNewSession, OverMutualTlsALoopbackCallerWithoutCertificateCannotMakeOneAgentCaptureAnother) {
  const testing::ScratchDirectory scratch("agent_new_session");
  const std::string root = scratch.path();
  const fs::path certs = make_certs(root);
  std::vector<std::string> first_args = tls_agent_args(certs, "cli.podscope.test,agent.podscope.test");
  first_args.insert(first_args.end(), {"--repository_root", root, "--plaintext_listen", "127.0.0.1:0"});
  AgentProcess first(first_args);
  AgentProcess second(tls_agent_args(certs, "cli.podscope.test,agent.podscope.test"));
  std::smatch m;
  const std::regex plaintext_line("plaintext=127\\.0\\.0\\.1:(\\d+)");
  ASSERT_TRUE(std::regex_search(first.output(), m, plaintext_line)) << first.output();
  const std::string plaintext = "127.0.0.1:" + m[1].str();
  const auto plaintext_channel = grpc::CreateChannel(plaintext, grpc::InsecureChannelCredentials());
  const testing::TfCapture capture = testing::tf_capture(200, root, "plaintext_run");

  // The caller could not call the second agent itself (no certificate): the first does not do it for it.
  const testing::RawReply refused = testing::call_with_bytes(
      plaintext_channel, kNewSession,
      testing::tf_new_session_request(capture, {first.grpc_address(), second.grpc_address()}), 60);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.status.error_message();
  EXPECT_NE(refused.status.error_message().find(second.grpc_address()), std::string::npos);
  // Its own node, which it reaches on the plaintext port anyway, it may capture.
  const testing::RawReply own = testing::call_with_bytes(
      plaintext_channel, kNewSession, testing::tf_new_session_request(capture, {first.grpc_address()}), 60);
  ASSERT_TRUE(own.status.ok()) << own.status.error_message();
  second.read_some(300);
  EXPECT_EQ(second.output().find("audit: Profile"), std::string::npos) << second.output();
}

TEST(AgentNewSession, AWorkerDecidesOnTheCallerTheFanOutCarriesNotOnTheAgentThatDials) {
  const testing::ScratchDirectory scratch("agent_new_session");
  const std::string root = scratch.path();
  const fs::path certs = make_certs(root);
  std::vector<std::string> first_args = tls_agent_args(certs, "cli.podscope.test,agent.podscope.test");
  first_args.insert(first_args.end(), {"--repository_root", root});
  AgentProcess first(first_args);
  // The second lets the agents in, but not the CLI's certificate.
  AgentProcess second(tls_agent_args(certs, "agent.podscope.test"));
  const testing::TfCapture capture = testing::tf_capture(200, root, "forwarded");
  const testing::RawReply reply = testing::call_with_bytes(
      tls_channel(first, certs, "cli"), kNewSession,
      testing::tf_new_session_request(capture, {first.grpc_address(), second.grpc_address()}), 60);
  ASSERT_TRUE(reply.status.ok()) << reply.status.error_message();
  EXPECT_TRUE(
      wait_for_output(second, std::regex("refused Profile from cli\\.podscope\\.test via \\S*agent\\.podscope\\.test")))
      << second.output();
  EXPECT_EQ(second.output().find("audit: Profile"), std::string::npos) << second.output();
  const fs::path run = fs::path(root) / "forwarded";
  EXPECT_TRUE(fs::exists(run / ("127.0.0.1_" + std::to_string(first.grpc_port()) + ".xplane.pb")));
  EXPECT_FALSE(fs::exists(run / ("127.0.0.1_" + std::to_string(second.grpc_port()) + ".xplane.pb")));
}

}  // namespace
}  // namespace podscope
