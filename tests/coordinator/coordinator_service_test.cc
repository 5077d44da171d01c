// podscope.v1.Coordinator and tensorflow.ProfileAnalysis served in-process on loopback, with lightweight
// agents registering: selection, streamed capture into the client's logdir, NewSession confinement.
#include "coordinator/coordinator_service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include <prometheus/text_serializer.h>

#include "coordinator/pod_snapshots.h"
#include "tls/credentials.h"
#include "pod_capture/remote_capture.h"
#include "run_directory/run_directory.h"
#include "tests/pod_capture/lightweight_agent.h"
#include "tests/pod_capture/small_disk.h"
#include "tests/scratch_directory.h"

namespace podscope::coordinator {
namespace {

// A clock the coordinator measured (the estimate itself does not matter to these tests).
pod_capture::ClockMeasurement measured_clock() {
  pod_capture::ClockMeasurement m;
  m.kind = pod_capture::ClockMeasurement::kMeasured;
  return m;
}

using testing::LightweightAgent;
using testing::TimerThread;

constexpr size_t kMaxWorkers = 8;
constexpr int64_t kPodSnapshotBytes = 1 << 20;
// Who a plaintext caller on loopback is to the registry: its address.
constexpr char kLoopbackOwner[] = "address 127.0.0.1";

class CoordinatorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    settings_.repository_root = root_.path();
    registry_ = std::make_unique<WorkerRegistry>(1'000'000'000, kMaxWorkers, grpc::InsecureChannelCredentials());
    runner_ = std::make_unique<CaptureRunner>(*registry_, metrics_, clock_);
    pod_snapshots_ = std::make_unique<PodSnapshots>(
        *registry_, *runner_,
        PodSnapshotSettings{settings_.repository_root, 1000, 0, settings_.clock_sync_pings, 0, kPodSnapshotBytes},
        clock_, metrics_);
    coordinator_ = std::make_unique<CoordinatorService>(*registry_, *runner_, settings_, clock_, metrics_,
                                                        *pod_snapshots_, authorizer_, check_);
    analysis_ = std::make_unique<ProfileAnalysisService>(*registry_, *runner_, settings_, clock_, authorizer_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(coordinator_.get());
    builder.RegisterService(analysis_.get());
    server_ = builder.BuildAndStart();
    channel_ = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    for (int i = 0; i < 3; ++i) {
      agents_.push_back(std::make_unique<LightweightAgent>(
          testing::LightweightAgentOptions{.host_name = "host" + std::to_string(i), .clock_offset_ns = i * 2'000'000},
          timers_));
      podscope::v1::RegisterRequest request;
      request.set_host_name("host" + std::to_string(i));
      request.set_address(agents_.back()->address());
      request.set_job(i == 2 ? "eval" : "train");
      request.set_instance_id("lightweight");
      podscope::v1::RegisterResponse response;
      grpc::ClientContext context;
      ASSERT_TRUE(podscope::v1::Coordinator::NewStub(channel_)->Register(&context, request, &response).ok());
      EXPECT_EQ(response.heartbeat_interval_ms(), settings_.heartbeat_interval_ms);
    }
  }
  void TearDown() override { server_->Shutdown(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Another agent on loopback, answering as `host_name` and `instance_id`.
  std::unique_ptr<LightweightAgent> agent_named(const std::string& host_name, const std::string& instance_id) {
    return std::make_unique<LightweightAgent>(
        testing::LightweightAgentOptions{.host_name = host_name, .instance_id = instance_id}, timers_);
  }
  // podscope_coordinator_registrations_refused_total{reason}.
  double refused(const std::string& reason) const {
    for (const auto& family : metrics_.registry()->Collect()) {
      if (family.name != "podscope_coordinator_registrations_refused_total") continue;
      for (const auto& m : family.metric)
        for (const auto& label : m.label)
          if (label.name == "reason" && label.value == reason) return m.counter.value;
    }
    return -1;
  }

  const testing::ScratchDirectory root_{"coord_service_root"};
  Clock clock_;
  CoordinatorSettings settings_;
  CoordinatorMetrics metrics_;
  tls::CallAuthorizer authorizer_{tls::TlsConfig{}, *metrics_.registry(), prometheus::Labels{}};
  RegistrationCheck check_{grpc::InsecureChannelCredentials()};
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<CaptureRunner> runner_;
  std::unique_ptr<PodSnapshots> pod_snapshots_;
  std::unique_ptr<CoordinatorService> coordinator_;
  std::unique_ptr<ProfileAnalysisService> analysis_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  // A capture of `host` through the coordinator holds `holder`'s host file and not `other`'s.
  void expect_capture_holds_only(const std::string& host, const LightweightAgent& holder,
                                 const LightweightAgent& other) {
    podscope::v1::CaptureRequest request;
    request.add_hosts(host);
    request.set_duration_ms(100);
    const testing::ScratchDirectory logdir("coord_service_capture");
    auto outcome = pod_capture::capture_through_coordinator(address(), grpc::InsecureChannelCredentials(), request,
                                                            logdir.path(), [](const std::string&) {});
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_EQ(outcome->exit_code, 0);
    auto host_file = [&](const LightweightAgent& agent) {
      return outcome->run_dir / (pod_capture::host_file_stem(agent.address()) + ".xplane.pb");
    };
    EXPECT_TRUE(std::filesystem::exists(host_file(holder)));
    EXPECT_FALSE(std::filesystem::exists(host_file(other)));
  }
  int port_ = 0;
  TimerThread timers_;
  std::vector<std::unique_ptr<LightweightAgent>> agents_;
};

TEST_F(CoordinatorServiceTest, CapturesAJobAndStreamsTheRunIntoTheClientsLogdir) {
  podscope::v1::CaptureRequest request;
  request.set_duration_ms(200);
  request.add_jobs("train");
  const testing::ScratchDirectory logdir("coord_service_client");
  std::vector<std::string> progress;
  auto outcome =
      pod_capture::capture_through_coordinator(address(), grpc::InsecureChannelCredentials(), request, logdir.path(),
                                               [&](const std::string& line) { progress.push_back(line); });
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code, 0);
  EXPECT_EQ(progress.front(), "Starting to trace for 200 ms. Remaining attempt(s): 2");
  std::vector<std::string> host_files;
  bool have_capture_json = false, have_trace = false;
  for (const auto& e : std::filesystem::directory_iterator(outcome->run_dir)) {
    const std::string name = e.path().filename();
    if (name.ends_with(".xplane.pb")) host_files.push_back(name);
    have_capture_json |= name == "capture.json";
    have_trace |= name == "pod.trace.json.gz";
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << "leftover " << name;
  }
  std::sort(host_files.begin(), host_files.end());
  std::vector<std::string> expected = {pod_capture::host_file_stem(agents_[0]->address()) + ".xplane.pb",
                                       pod_capture::host_file_stem(agents_[1]->address()) + ".xplane.pb"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(host_files, expected) << "only the train job's two workers";
  EXPECT_TRUE(have_capture_json);
  EXPECT_TRUE(have_trace);
  // The coordinator keeps its copy under its repository root.
  EXPECT_TRUE(std::filesystem::exists(
      run_directory::RunDirectory::in_logdir(settings_.repository_root, outcome->run_dir.filename()).local_path() /
      "capture.json"));
  EXPECT_NE(outcome->summary_text.find("(host1): ok"), std::string::npos) << outcome->summary_text;
}

// The client's logdir fills while the run streams in: the capture fails naming why, and the partial copy goes (a
// run lacking files would pass for a smaller whole one); the coordinator keeps its own.
TEST_F(CoordinatorServiceTest, AClientDiskThatFillsLeavesNoPartialCopyOfTheRun) {
  testing::SmallDisk disk("coord_service_full_client_disk");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root): the client's disk cannot fill alone";
  disk.leave_room(8192);
  podscope::v1::CaptureRequest request;
  request.set_duration_ms(200);
  request.add_jobs("train");
  auto outcome = pod_capture::capture_through_coordinator(address(), grpc::InsecureChannelCredentials(), request,
                                                          disk.dir() / "logdir", [](const std::string&) {});
  ASSERT_FALSE(outcome.ok()) << outcome->summary_text;
  EXPECT_NE(std::string(outcome.status().message()).find("No space left on device"), std::string::npos)
      << outcome.status();
  EXPECT_NE(std::string(outcome.status().message()).find("was removed"), std::string::npos) << outcome.status();
  const auto runs = disk.dir() / "logdir" / "plugins" / "profile";
  EXPECT_TRUE(!std::filesystem::exists(runs) || std::filesystem::is_empty(runs)) << "a partial copy stayed";
}

TEST_F(CoordinatorServiceTest, UnknownWorkerIsAnInvalidArgumentNamingIt) {
  podscope::v1::CaptureRequest request;
  request.add_hosts("host9");
  const testing::ScratchDirectory logdir("coord_service_unknown");
  auto outcome = pod_capture::capture_through_coordinator(address(), grpc::InsecureChannelCredentials(), request,
                                                          logdir.path(), [](const std::string&) {});
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(std::string(outcome.status().message()).find("unknown worker(s): host9"), std::string::npos);
}

TEST_F(CoordinatorServiceTest, SilentWorkersAreMarkedDownNotForgotten) {
  const int64_t later = clock_.now_ns() + 2'000'000'000;
  ASSERT_TRUE(registry_->heartbeat("host0", agents_[0]->address(), kLoopbackOwner, later));
  const auto workers = registry_->list(later);
  ASSERT_EQ(workers.size(), 3u);
  EXPECT_TRUE(workers[0].up());
  EXPECT_FALSE(workers[1].up());
  EXPECT_FALSE(registry_->heartbeat("host7", "127.0.0.1:1", kLoopbackOwner, later))
      << "unknown agents must register again";
}

TEST_F(CoordinatorServiceTest, NewSessionWritesOnlyInsideTheRepositoryRoot) {
  auto stub = tensorflow::ProfileAnalysis::NewStub(channel_);
  tensorflow::NewProfileSessionRequest request;
  request.mutable_request()->set_duration_ms(100);
  request.add_hosts("host0");
  request.add_hosts(agents_[1]->address());
  request.set_repository_root("plugins/profile");
  request.set_session_id("tb_session");
  tensorflow::NewProfileSessionResponse response;
  {
    grpc::ClientContext context;
    const grpc::Status status = stub->NewSession(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_FALSE(response.empty_trace());
  EXPECT_TRUE(response.error_message().empty()) << response.error_message();
  const auto dir = std::filesystem::weakly_canonical(settings_.repository_root) / "plugins/profile/tb_session";
  EXPECT_TRUE(std::filesystem::exists(dir / (pod_capture::host_file_stem(agents_[0]->address()) + ".xplane.pb")));
  EXPECT_TRUE(std::filesystem::exists(dir / (pod_capture::host_file_stem(agents_[1]->address()) + ".xplane.pb")));

  for (const std::string escape : {"../outside", "/etc"}) {
    request.set_repository_root(escape);
    grpc::ClientContext context;
    const grpc::Status status = stub->NewSession(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << escape;
    EXPECT_NE(status.error_message().find("outside the coordinator's root"), std::string::npos);
  }
  request.set_repository_root("");
  request.set_session_id("../x");
  grpc::ClientContext context;
  EXPECT_EQ(stub->NewSession(&context, request, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// Registration over the real gRPC service, as an attacker that can reach the coordinator would send it.
grpc::Status register_as(const std::shared_ptr<grpc::Channel>& channel, const std::string& host,
                         const std::string& address, const std::string& instance_id) {
  podscope::v1::RegisterRequest request;
  request.set_host_name(host);
  request.set_address(address);
  request.set_instance_id(instance_id);
  podscope::v1::RegisterResponse response;
  grpc::ClientContext context;
  return podscope::v1::Coordinator::NewStub(channel)->Register(&context, request, &response);
}

TEST_F(CoordinatorServiceTest, RegistrationCannotRedirectALiveWorkerOfAnotherAgentInstance) {
  // host1 was registered (instance "") by SetUp; a stranger claims it from host2's agent address.
  const grpc::Status hijack = register_as(channel_, "host1", agents_[2]->address(), "intruder");
  EXPECT_EQ(hijack.error_code(), grpc::StatusCode::PERMISSION_DENIED) << hijack.error_message();
  EXPECT_NE(hijack.error_message().find("cannot move it"), std::string::npos) << hijack.error_message();
  EXPECT_EQ(refused("address_taken"), 1);
  EXPECT_EQ(refused("registry_full"), 0);

  // A capture of host1 still reaches host1's agent.
  expect_capture_holds_only("host1", *agents_[1], *agents_[2]);
}

grpc::Status forget(const std::shared_ptr<grpc::Channel>& channel, const std::string& host) {
  grpc::ClientContext context;
  podscope::v1::ForgetWorkerRequest request;
  request.set_host_name(host);
  podscope::v1::ForgetWorkerResponse response;
  return podscope::v1::Coordinator::NewStub(channel)->ForgetWorker(&context, request, &response);
}

TEST_F(CoordinatorServiceTest, WithoutTlsOnlyARegistryAdminForgetsANameAndNoneIsRegisteredAtAnotherAgentsAddress) {
  // The attack as any client of the plaintext port makes it: forget host2, register host2 at host0's agent, capture
  // host2. Before, the forget passed, the registration was taken, and the capture of host2 exited 0 with host0's
  // data while the real host2 was refused.
  const grpc::Status forgot = forget(channel_, "host2");
  EXPECT_EQ(forgot.error_code(), grpc::StatusCode::PERMISSION_DENIED) << forgot.error_message();
  EXPECT_NE(forgot.error_message().find("registry_admins"), std::string::npos) << forgot.error_message();
  ASSERT_TRUE(registry_->owner("host2").has_value()) << "still registered";
  // Even with the name free, host0's agent does not answer as host2, whatever instance id the stranger guesses.
  ASSERT_TRUE(registry_->forget("host2"));
  const grpc::Status hijack = register_as(channel_, "host2", agents_[0]->address(), "lightweight");
  EXPECT_EQ(hijack.error_code(), grpc::StatusCode::PERMISSION_DENIED) << hijack.error_message();
  EXPECT_NE(hijack.error_message().find("the agent at that address is host0"), std::string::npos)
      << hijack.error_message();
  EXPECT_EQ(refused("unverified"), 1);
  // The real host2 registers again, and a capture of host2 holds host2's data.
  ASSERT_TRUE(register_as(channel_, "host2", agents_[2]->address(), "lightweight").ok());
  ASSERT_NO_FATAL_FAILURE(expect_capture_holds_only("host2", *agents_[2], *agents_[0]));
  // An operator whose address the coordinator lists in registry_admins may forget it.
  settings_.registry_admins = {"127.0.0.1"};
  EXPECT_TRUE(forget(channel_, "host2").ok());
  EXPECT_FALSE(registry_->owner("host2").has_value());
}

TEST_F(CoordinatorServiceTest, RegistrationsPointingAtAnotherLiveAgentAreRefusedAndTheirSourceIsCapped) {
  // Before, 4,092 registrations of made-up names at one live agent's address were all taken, were never evicted
  // (each became known: the agent answered its pings) and made the coordinator ping that agent 4,092 times per
  // clock-sync burst. Now each is checked by a call-back until its source has failed kMaxFailuresPerSource times;
  // the rest are refused without calling anyone.
  constexpr int kFakes = 4092;
  const int pings_before = agents_[0]->ping_calls();
  int unverified = 0, too_many = 0;
  for (int i = 0; i < kFakes; ++i) {
    const grpc::Status s = register_as(channel_, "fake" + std::to_string(i), agents_[0]->address(), "guess");
    unverified += s.error_code() == grpc::StatusCode::PERMISSION_DENIED ? 1 : 0;
    too_many += s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ? 1 : 0;
  }
  const int pinged = agents_[0]->ping_calls() - pings_before;
  std::printf(
      "%d registrations at one live agent: %d refused after a call-back, %d refused without one; the agent "
      "was called %d times; the registry holds %zu workers\n",
      kFakes, unverified, too_many, pinged, registry_->list(clock_.now_ns()).size());
  EXPECT_EQ(unverified, RegistrationCheck::kMaxFailuresPerSource);
  EXPECT_EQ(too_many, kFakes - RegistrationCheck::kMaxFailuresPerSource);
  EXPECT_EQ(pinged, RegistrationCheck::kMaxFailuresPerSource);
  EXPECT_EQ(registry_->list(clock_.now_ns()).size(), 3u);
  EXPECT_EQ(refused("unverified"), RegistrationCheck::kMaxFailuresPerSource);
  EXPECT_EQ(refused("too_many"), kFakes - RegistrationCheck::kMaxFailuresPerSource);
}

TEST_F(CoordinatorServiceTest, TheSameAgentInstanceMayMoveAndADownWorkerMayComeBackAnywhere) {
  const auto first = agent_named("mover", "instance-a");
  const auto moved = agent_named("mover", "instance-a");
  const auto restarted_agent = agent_named("mover", "instance-b");
  ASSERT_TRUE(register_as(channel_, "mover", first->address(), "instance-a").ok());
  EXPECT_TRUE(register_as(channel_, "mover", moved->address(), "instance-a").ok()) << "its own agent moved";
  EXPECT_EQ(register_as(channel_, "mover", restarted_agent->address(), "instance-b").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Once it is down (silent past the window), a restarted agent (new instance) registers from its new address.
  const int64_t later = clock_.now_ns() + 5'000'000'000;
  podscope::v1::RegisterRequest restarted;
  restarted.set_host_name("mover");
  restarted.set_address(restarted_agent->address());
  restarted.set_instance_id("instance-b");
  EXPECT_TRUE(registry_->register_worker(restarted, kLoopbackOwner, later).ok());
}

TEST_F(CoordinatorServiceTest, ARegistrationWhoseNamesAreNoCleanTextIsRefusedAndTheMetricsStayValid) {
  // (Invalid UTF-8 never gets this far: gRPC's parser refuses a proto3 string holding it.)
  for (const std::string& host : {std::string("forged\nline"), std::string("esc\x1b[2J"), std::string(256, 'h')}) {
    const grpc::Status s = register_as(channel_, host, agents_[0]->address(), "x");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << host;
  }
  EXPECT_EQ(refused("invalid"), 3);
  metrics_.update_workers(registry_->list(clock_.now_ns()));
  const std::string scrape = prometheus::TextSerializer().Serialize(metrics_.registry()->Collect());
  EXPECT_EQ(scrape.find("forged"), std::string::npos);
  EXPECT_EQ(scrape.find("esc"), std::string::npos);
}

TEST_F(CoordinatorServiceTest, StaticWorkerAddressNeverChangesByRegistration) {
  const auto static9 = agent_named("static9", "x");
  registry_->add_static("static9", static9->address());
  const grpc::Status s = register_as(channel_, "static9", agents_[2]->address(), "x");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("is configured at"), std::string::npos) << s.error_message();
  EXPECT_EQ(refused("address_taken"), 1);
  EXPECT_TRUE(register_as(channel_, "static9", static9->address(), "x").ok()) << "same address: accepted";
}

// Registrations that name no agent of their own, taken as the registry takes them (RegistrationCheck refuses them
// over gRPC): `count` of them, "fake<i>" at 127.0.0.1:<1000+i>.
void fill_with_fakes(WorkerRegistry& registry, size_t first, size_t count, int64_t now_ns) {
  for (size_t i = first; i < first + count; ++i) {
    podscope::v1::RegisterRequest fake;
    fake.set_host_name("fake" + std::to_string(i));
    fake.set_address("127.0.0.1:" + std::to_string(1000 + i));
    fake.set_instance_id("f");
    ASSERT_TRUE(registry.register_worker(fake, kLoopbackOwner, now_ns).ok()) << i;
  }
}

TEST_F(CoordinatorServiceTest, RegistryIsCappedSaysSoAndCountsTheRefusal) {
  // SetUp registered 3; fill up to the cap, then one more agent is refused.
  fill_with_fakes(*registry_, 3, kMaxWorkers - 3, clock_.now_ns());
  const auto newcomer = agent_named("one-too-many", "n");
  const grpc::Status s = register_as(channel_, "one-too-many", newcomer->address(), "n");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("max_workers"), std::string::npos) << s.error_message();
  EXPECT_EQ(refused("registry_full"), 1) << "counted";
  EXPECT_TRUE(register_as(channel_, "host0", agents_[0]->address(), "lightweight").ok())
      << "known workers still re-register";
}

TEST_F(CoordinatorServiceTest, NewSessionRefusesASessionIdThatIsNotOnePlainName) {
  auto stub = tensorflow::ProfileAnalysis::NewStub(channel_);
  tensorflow::NewProfileSessionRequest request;
  request.mutable_request()->set_duration_ms(100);
  request.add_hosts("host0");
  for (const std::string& bad : {std::string("tb\0session", 10), std::string("a/b"), std::string("..")}) {
    request.set_session_id(bad);
    tensorflow::NewProfileSessionResponse response;
    grpc::ClientContext context;
    EXPECT_EQ(stub->NewSession(&context, request, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << bad.size() << " bytes";
  }
  EXPECT_EQ(agents_[0]->profile_calls(), 0) << "refused before any capture";
}

TEST(ConfineToRoot, RefusesWithoutARoot) {
  auto resolved = confine_to_root("", "anything");
  ASSERT_FALSE(resolved.ok());
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kFailedPrecondition);
}

// A report of a slow step of `host` that ended at `step_end_ns`, with no cool-down of its own.
podscope::v1::TriggerReport slow_step_report(const std::string& host, int64_t step, int64_t step_end_ns) {
  podscope::v1::TriggerReport r;
  r.set_host_name(host);
  r.set_reason("slow_step");
  r.set_step_num(step);
  r.set_step_ns(300'000'000);
  r.set_median_ns(10'000'000);
  r.set_step_end_ns(step_end_ns);
  r.set_window_ms(1'000);
  r.set_cooldown_ms(0);
  return r;
}

TEST_F(CoordinatorServiceTest, TriggersOfTheSameJobAndStepMakeOnePodSnapshot) {
  auto stub = podscope::v1::Coordinator::NewStub(channel_);
  auto report = [&](const std::string& host, int64_t step) {
    // Far in the coordinator's future: the snapshot waits for its span, so the later reports find it pending.
    podscope::v1::TriggerReport r = slow_step_report(host, step, clock_.now_ns() + 3'600'000'000'000);
    r.set_window_ms(30'000);
    r.set_cooldown_ms(60'000);
    grpc::ClientContext context;
    podscope::v1::TriggerReportResponse response;
    EXPECT_TRUE(stub->ReportTrigger(&context, r, &response).ok());
    return response;
  };
  const podscope::v1::TriggerReportResponse first = report("host0", 40);
  EXPECT_NE(first.run_name().find("slow_step_40"), std::string::npos) << first.run_name();
  const podscope::v1::TriggerReportResponse same_step = report("host1", 40);
  EXPECT_TRUE(same_step.run_name().empty());
  EXPECT_NE(same_step.detail().find("already has a pod snapshot"), std::string::npos) << same_step.detail();
  const podscope::v1::TriggerReportResponse next_step = report("host1", 41);
  EXPECT_TRUE(next_step.run_name().empty());
  EXPECT_NE(next_step.detail().find("joined the pod snapshot " + first.run_name()), std::string::npos)
      << next_step.detail();
  // Another job gets a snapshot of its own.
  EXPECT_FALSE(report("host2", 40).run_name().empty());

  grpc::ClientContext context;
  podscope::v1::TriggerReport unknown;
  unknown.set_host_name("nobody");
  podscope::v1::TriggerReportResponse response;
  EXPECT_EQ(stub->ReportTrigger(&context, unknown, &response).error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(CoordinatorServiceTest, PodSnapshotsOfAJobAreRateLimitedWhateverCoolDownTheReporterClaims) {
  PodSnapshots snapshots(*registry_, *runner_,
                         PodSnapshotSettings{settings_.repository_root, 500, 0, 2, 60'000, kPodSnapshotBytes}, clock_,
                         metrics_);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(
        registry_->heartbeat("host" + std::to_string(i), agents_[i]->address(), kLoopbackOwner, clock_.now_ns()));
  }
  const auto first = snapshots.report(slow_step_report("host0", 1, clock_.now_ns()));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_FALSE(first->run_name().empty()) << first->detail();
  // Four more reports of new steps, each after the previous snapshot was taken: none gets another.
  const auto taken = std::filesystem::path(settings_.repository_root) / "plugins/profile" / first->run_name();
  for (int i = 0; i < 200 && !std::filesystem::exists(taken / "capture.json"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(std::filesystem::exists(taken / "capture.json"));
  for (int64_t step = 2; step <= 5; ++step) {
    const auto later = snapshots.report(slow_step_report("host0", step, clock_.now_ns()));
    ASSERT_TRUE(later.ok());
    EXPECT_TRUE(later->run_name().empty()) << step;
    EXPECT_NE(later->detail().find("pod_snapshot_min_interval_ms"), std::string::npos) << later->detail();
  }
  const std::string scrape = prometheus::TextSerializer().Serialize(metrics_.registry()->Collect());
  EXPECT_NE(scrape.find("podscope_coordinator_pod_snapshots_skipped_total{reason=\"rate_limited\"} 4"),
            std::string::npos)
      << scrape;
  snapshots.stop();
}

TEST_F(CoordinatorServiceTest, NoPodSnapshotIsTakenWhileThoseKeptHoldTheDiskCap) {
  PodSnapshots snapshots(*registry_, *runner_,
                         PodSnapshotSettings{settings_.repository_root, 500, 0, 2, 0, kPodSnapshotBytes}, clock_,
                         metrics_);
  const auto old = std::filesystem::path(settings_.repository_root) / "plugins/profile/old_snapshot";
  std::filesystem::create_directories(old);
  std::ofstream(old / "capture.json") << R"({"recorded_window": {"kind": "triggered_snapshot"}})";
  std::ofstream(old / "host0.xplane.pb") << std::string(kPodSnapshotBytes, 'x');
  const auto answer = snapshots.report(slow_step_report("host0", 9, clock_.now_ns()));
  ASSERT_TRUE(answer.ok());
  EXPECT_TRUE(answer->run_name().empty());
  EXPECT_NE(answer->detail().find("pod_snapshot_max_mb"), std::string::npos) << answer->detail();
  const std::string scrape = prometheus::TextSerializer().Serialize(metrics_.registry()->Collect());
  EXPECT_NE(scrape.find("podscope_coordinator_pod_snapshots_skipped_total{reason=\"disk_cap\"} 1"), std::string::npos)
      << scrape;
  // A plain capture of the same size is no pod snapshot: it does not count against the cap.
  std::filesystem::remove(old / "capture.json");
  const auto taken = snapshots.report(slow_step_report("host0", 10, clock_.now_ns()));
  ASSERT_TRUE(taken.ok());
  EXPECT_FALSE(taken->run_name().empty()) << taken->detail();
  snapshots.stop();
}

TEST_F(CoordinatorServiceTest, ATriggerReportMustComeFromTheAgentThatRegisteredTheWorkerItNames) {
  podscope::v1::RegisterRequest elsewhere;
  elsewhere.set_host_name("remote");
  elsewhere.set_address("10.9.9.9:8466");
  ASSERT_TRUE(registry_->register_worker(elsewhere, "address 10.9.9.9", clock_.now_ns()).ok());
  // A forged report naming it, from this (loopback) caller, with no cool-down: refused, no snapshot.
  podscope::v1::TriggerReport forged;
  forged.set_host_name("remote");
  forged.set_reason("slow_step");
  forged.set_step_num(7);
  forged.set_step_end_ns(clock_.now_ns());
  forged.set_cooldown_ms(0);
  grpc::ClientContext context;
  podscope::v1::TriggerReportResponse response;
  const grpc::Status status = podscope::v1::Coordinator::NewStub(channel_)->ReportTrigger(&context, forged, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_NE(status.error_message().find("registered by address 10.9.9.9, not by address 127.0.0.1"), std::string::npos)
      << status.error_message();
  EXPECT_TRUE(response.run_name().empty());
}

TEST_F(CoordinatorServiceTest, ANameBelongsToWhoRegisteredItEvenWhileItIsDownUntilForgotten) {
  podscope::v1::RegisterRequest request;
  request.set_host_name("worker-a");
  request.set_address("10.0.0.1:8466");
  const int64_t now = clock_.now_ns();
  ASSERT_TRUE(registry_->register_worker(request, "agent-a.example", now).ok());
  registry_->record_clock("worker-a", measured_clock(), now);
  // Long down, another identity claims it from another address: refused, and its heartbeats are not taken.
  const int64_t later = now + 60'000'000'000;
  podscope::v1::RegisterRequest takeover = request;
  takeover.set_address("10.0.0.66:8466");
  takeover.set_instance_id("intruder");
  const absl::Status refused = registry_->register_worker(takeover, "intruder.example", later);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("belongs to agent-a.example"), std::string::npos) << refused.message();
  EXPECT_FALSE(registry_->heartbeat("worker-a", "10.0.0.1:8466", "intruder.example", later));
  // The real agent comes back, from anywhere.
  request.set_address("10.0.0.2:8466");
  EXPECT_TRUE(registry_->register_worker(request, "agent-a.example", later).ok());
  // An operator frees the name; then anyone may take it.
  EXPECT_EQ(registry_->owner("worker-a"), "agent-a.example");
  EXPECT_TRUE(registry_->forget("worker-a"));
  EXPECT_TRUE(registry_->register_worker(takeover, "intruder.example", later).ok());
  EXPECT_FALSE(registry_->forget("host-never-registered"));
}

TEST_F(CoordinatorServiceTest, StaleRegistrationsExpireAndMakeRoomAndAReturningKnownAgentIsNeverBlocked) {
  const int64_t now = clock_.now_ns();
  // host0 proved itself (its clock was measured); SetUp's others never did.
  registry_->record_clock("host0", measured_clock(), now);
  // Fill the registry with fakes that point at nothing: their pings fail.
  fill_with_fakes(*registry_, 3, kMaxWorkers - 3, clock_.now_ns());
  for (size_t i = 3; i < kMaxWorkers; ++i) {
    registry_->record_clock("fake" + std::to_string(i), pod_capture::ClockMeasurement{}, clock_.now_ns());
  }
  // A new agent still gets in: the stalest unreachable fake makes room.
  const auto newcomer = agent_named("newcomer", "n");
  EXPECT_TRUE(register_as(channel_, "newcomer", newcomer->address(), "n").ok());
  EXPECT_EQ(registry_->list(clock_.now_ns()).size(), kMaxWorkers);
  // Past the down window every registration that never proved itself is gone; host0, down, is kept.
  const int64_t later = clock_.now_ns() + 5'000'000'000;
  podscope::v1::RegisterRequest fresh;
  fresh.set_address("127.0.0.1:1");
  for (size_t i = 0; i + 1 < kMaxWorkers; ++i) {
    fresh.set_host_name("live-fake" + std::to_string(i));
    ASSERT_TRUE(registry_->register_worker(fresh, kLoopbackOwner, later).ok()) << i;
  }
  std::vector<std::string> names;
  for (const auto& worker : registry_->list(later)) names.push_back(worker.host_name());
  EXPECT_NE(std::find(names.begin(), names.end(), "host0"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "fake3"), names.end());
  // Full of fresh registrations: a stranger is refused, the returning known agent is not.
  fresh.set_host_name("stranger");
  EXPECT_EQ(registry_->register_worker(fresh, kLoopbackOwner, later).code(), absl::StatusCode::kResourceExhausted);
  podscope::v1::RegisterRequest returning;
  returning.set_host_name("host0");
  returning.set_address(agents_[0]->address());
  EXPECT_TRUE(registry_->register_worker(returning, kLoopbackOwner, later).ok());
}

}  // namespace
}  // namespace podscope::coordinator

namespace podscope::coordinator {
namespace {

// The coordinator's services over mutual TLS with the test certificates (tests/integration/test_certs.py): the
// agents' certificate (server.pem) and the CLI's are allowed, the intruder's is signed by the same CA but is not.
class CoordinatorOverTlsTest : public ::testing::Test {
 protected:
  // Made once: openssl's key generation is slow on a loaded box.
  static void SetUpTestSuite() {
    certs_ = std::make_unique<testing::ScratchDirectory>("coord_service_certs");
    const std::string make =
        "python3 " PODSCOPE_SOURCE_DIR "/tests/integration/test_certs.py " + certs_->path().string();
    ASSERT_EQ(std::system(make.c_str()), 0) << make;
  }
  static void TearDownTestSuite() { certs_.reset(); }
  void SetUp() override {
    settings_.repository_root = root_.path();
    tls_ = tls::TlsConfig{.cert = (certs_->path() / "server.pem").string(),
                          .key = (certs_->path() / "server.key").string(),
                          .client_ca = (certs_->path() / "ca.pem").string(),
                          .allowed_clients = {"agent.podscope.test", "cli.podscope.test"}};
    authorizer_ = std::make_unique<tls::CallAuthorizer>(tls_, *metrics_.registry(), prometheus::Labels{});
    settings_.tls_on = true;
    settings_.registry_admins = {"cli.podscope.test"};
    registry_ = std::make_unique<WorkerRegistry>(1'000'000'000, kMaxWorkers, grpc::InsecureChannelCredentials());
    runner_ = std::make_unique<CaptureRunner>(*registry_, metrics_, clock_);
    pod_snapshots_ = std::make_unique<PodSnapshots>(
        *registry_, *runner_, PodSnapshotSettings{settings_.repository_root, 1000, 0, 2, 0, kPodSnapshotBytes}, clock_,
        metrics_);
    coordinator_ = std::make_unique<CoordinatorService>(*registry_, *runner_, settings_, clock_, metrics_,
                                                        *pod_snapshots_, *authorizer_, check_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", tls::server_credentials(tls_), &port_);
    builder.RegisterService(coordinator_.get());
    server_ = builder.BuildAndStart();
  }
  void TearDown() override {
    server_->Shutdown();
    pod_snapshots_->stop();
  }
  // A stub presenting the test certificate `name`.
  std::unique_ptr<podscope::v1::Coordinator::Stub> as(const std::string& name) const {
    const tls::TlsConfig client{.cert = (certs_->path() / (name + ".pem")).string(),
                                .key = (certs_->path() / (name + ".key")).string(),
                                .ca = (certs_->path() / "ca.pem").string()};
    return podscope::v1::Coordinator::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), tls::channel_credentials(client)));
  }
  static grpc::Status register_worker(podscope::v1::Coordinator::Stub& stub, const std::string& host,
                                      const std::string& address) {
    podscope::v1::RegisterRequest request;
    request.set_host_name(host);
    request.set_address(address);
    request.set_instance_id("lightweight");
    podscope::v1::RegisterResponse response;
    grpc::ClientContext context;
    return stub.Register(&context, request, &response);
  }

  const testing::ScratchDirectory root_{"coord_service_root"};
  Clock clock_;
  CoordinatorSettings settings_;
  CoordinatorMetrics metrics_;
  static inline std::unique_ptr<testing::ScratchDirectory> certs_;
  tls::TlsConfig tls_;
  std::unique_ptr<tls::CallAuthorizer> authorizer_;
  RegistrationCheck check_{grpc::InsecureChannelCredentials()};
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<CaptureRunner> runner_;
  std::unique_ptr<PodSnapshots> pod_snapshots_;
  std::unique_ptr<CoordinatorService> coordinator_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(CoordinatorOverTlsTest, ACertificateOutsideAllowedClientsCannotRegisterListOrTrigger) {
  auto intruder = as("intruder");
  const grpc::Status registered = register_worker(*intruder, "worker-x", "127.0.0.1:1");
  EXPECT_EQ(registered.error_code(), grpc::StatusCode::PERMISSION_DENIED) << registered.error_message();
  EXPECT_NE(registered.error_message().find("intruder.podscope.test"), std::string::npos);
  grpc::ClientContext list_context;
  podscope::v1::ListWorkersResponse workers;
  EXPECT_EQ(intruder->ListWorkers(&list_context, {}, &workers).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  grpc::ClientContext trigger_context;
  podscope::v1::TriggerReport report;
  report.set_host_name("worker-x");
  podscope::v1::TriggerReportResponse answer;
  EXPECT_EQ(intruder->ReportTrigger(&trigger_context, report, &answer).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(registry_->list(clock_.now_ns()).empty());
}

TEST_F(CoordinatorOverTlsTest, ANameBelongsToTheCertificateThatRegisteredItUntilAnOperatorForgetsIt) {
  auto agent = as("server");
  auto cli = as("cli");
  // Three agents answering as worker-a: where it first runs, where it comes back, and where the CLI's would.
  testing::TimerThread timers;
  std::vector<std::unique_ptr<testing::LightweightAgent>> worker_a;
  for (int i = 0; i < 3; ++i) {
    worker_a.push_back(
        std::make_unique<testing::LightweightAgent>(testing::LightweightAgentOptions{.host_name = "worker-a"}, timers));
  }
  const std::string first = worker_a[0]->address(), back = worker_a[1]->address(), other = worker_a[2]->address();
  ASSERT_TRUE(register_worker(*agent, "worker-a", first).ok());
  // Down (past the 1 s window), the name is still the agent's: another allowed certificate cannot take it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const grpc::Status takeover = register_worker(*cli, "worker-a", other);
  EXPECT_EQ(takeover.error_code(), grpc::StatusCode::PERMISSION_DENIED) << takeover.error_message();
  EXPECT_NE(takeover.error_message().find("belongs to localhost,agent.podscope.test"), std::string::npos)
      << takeover.error_message();
  // Nor report a trigger in its name.
  grpc::ClientContext trigger_context;
  podscope::v1::TriggerReport report;
  report.set_host_name("worker-a");
  podscope::v1::TriggerReportResponse answer;
  EXPECT_EQ(cli->ReportTrigger(&trigger_context, report, &answer).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(registry_->list(clock_.now_ns()).at(0).address(), first);
  // The agent itself comes back; then an operator (registry_admins) frees the name.
  EXPECT_TRUE(register_worker(*agent, "worker-a", back).ok());
  grpc::ClientContext forget_context;
  podscope::v1::ForgetWorkerRequest forget;
  forget.set_host_name("worker-a");
  podscope::v1::ForgetWorkerResponse forgotten;
  ASSERT_TRUE(cli->ForgetWorker(&forget_context, forget, &forgotten).ok());
  EXPECT_EQ(forgotten.owner(), "localhost,agent.podscope.test");
  EXPECT_TRUE(register_worker(*cli, "worker-a", other).ok());
}

TEST_F(CoordinatorOverTlsTest, OnlyTheCertificateThatRegisteredANameOrARegistryAdminForgetsIt) {
  testing::TimerThread timers;
  testing::LightweightAgent worker({.host_name = "worker-b"}, timers);
  auto agent = as("server");
  ASSERT_TRUE(register_worker(*agent, "worker-b", worker.address()).ok());
  settings_.registry_admins.clear();  // the CLI is an allowed client, but no operator of the registry now
  auto forget_as = [](podscope::v1::Coordinator::Stub& stub) {
    grpc::ClientContext context;
    podscope::v1::ForgetWorkerRequest forget;
    forget.set_host_name("worker-b");
    podscope::v1::ForgetWorkerResponse forgotten;
    return stub.ForgetWorker(&context, forget, &forgotten);
  };
  const grpc::Status refused = forget_as(*as("cli"));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("registry_admins"), std::string::npos) << refused.error_message();
  EXPECT_EQ(registry_->owner("worker-b"), "localhost,agent.podscope.test") << "still registered";
  EXPECT_TRUE(forget_as(*agent).ok()) << "its owner may";
}

TEST(WorkerRegistry, StaticWorkersAreUpWhileTheyAnswerPings) {
  testing::TimerThread timers;
  testing::LightweightAgent agent({.host_name = "static0", .clock_offset_ns = 3'000'000}, timers);
  WorkerRegistry registry(1'000'000'000, kMaxWorkers, grpc::InsecureChannelCredentials());
  registry.add_static("static0", agent.address());
  const Clock clock;
  EXPECT_FALSE(registry.list(clock.now_ns()).at(0).up()) << "not up before its first ping";
  registry.record_clock("static0", pod_capture::measure_clock(*registry.connection("static0"), clock, 8, 1000),
                        clock.now_ns());
  auto worker = registry.list(clock.now_ns()).at(0);
  EXPECT_TRUE(worker.up());
  EXPECT_TRUE(worker.static_worker());
  EXPECT_NEAR(static_cast<double>(worker.clock_offset_ns()), 3e6, 2e5);
  agent.shutdown();
  registry.record_clock("static0", pod_capture::measure_clock(*registry.connection("static0"), clock, 2, 200),
                        clock.now_ns());
  EXPECT_FALSE(registry.list(clock.now_ns()).at(0).up()) << "a static worker that stops answering is down";
  EXPECT_EQ(registry.list(clock.now_ns()).size(), 1u) << "and still listed";
}

}  // namespace
}  // namespace podscope::coordinator
