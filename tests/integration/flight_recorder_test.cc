// The flight recorder of the real podscope-agent binary with real annotated processes: with the recorder on,
// the last N ms of ring_trainer steps come back at once (podscope.v1 GetRecordedWindow); TensorFlow's
// continuous-profiling calls, sent as bytes written from TensorFlow's field numbers, start, snapshot (each
// snapshot holding what came after the previous one) and stop with TSL's status codes; a snapshot taken
// during a Profile leaves the Profile whole and recording goes on after it; with the recorder off the window
// call fails naming flight_recorder_seconds; under a flood the recorder stays under flight_recorder_max_mb,
// counts what it dropped and says, in status and in the window, the span it holds whole (shorter than asked,
// with a warning); a window that fits the cap comes back whole, without one; slow steps freeze stored
// snapshots, kept within their limits and served by id.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "daemon/grpc_status.h"
#include "podscope/v1/agent.grpc.pb.h"
#include "proto/xspace/xplane_reader.h"
#include "tensorflow/profiler_service.grpc.pb.h"
#include "tests/integration/agent_process.h"
#include "tests/integration/flood_process.h"
#include "tests/integration/trainer_process.h"
#include "tests/proto/wire_fields.h"
#include "tests/proto/xspace/xspace_contents.h"
#include "tests/sanitized.h"

namespace podscope {
namespace {

using namespace std::chrono_literals;
using tensorflow::profiler::XSpace;
using testing::agent_status;
using testing::AgentProcess;
using testing::steps_by_core;
using testing::TrainerProcess;
using testing::wait_for;

std::vector<std::unique_ptr<TrainerProcess>> start_ranks(int world, const std::string& socket,
                                                         const std::vector<std::string>& extra_args = {}) {
  const std::string peers = testing::peers_flag(testing::free_loopback_ports(world));
  std::vector<std::unique_ptr<TrainerProcess>> ranks;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> args{
        "--world", std::to_string(world), "--rank", std::to_string(r),  "--peers", peers, "--matrix",
        "64",      "--grad_bytes",        "65536",  "--progress_every", "1000"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    ranks.push_back(std::make_unique<TrainerProcess>(std::move(args), socket));
  }
  return ranks;
}

// One unary call with the request's bytes as given; the response's bytes.
grpc::Status raw_call(const AgentProcess& agent, const std::string& method, const std::string& request,
                      std::string& response) {
  auto channel = agent.channel();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  const grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel.get(), grpc::internal::RpcMethod(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC), &context,
      request_buffer, &response_buffer);
  std::vector<grpc::Slice> slices;
  response.clear();
  if (status.ok() && response_buffer.Dump(&slices).ok())
    for (const auto& s : slices) response.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return status;
}

// TensorFlow's method names and field numbers: ProfileResponse.xspace = 8, ProfileResponse.empty_trace = 7,
// ProfileRequest.duration_ms = 1.
constexpr char kStart[] = "/tensorflow.ProfilerService/StartContinuousProfiling";
constexpr char kSnapshot[] = "/tensorflow.ProfilerService/GetSnapshot";
constexpr char kStop[] = "/tensorflow.ProfilerService/StopContinuousProfiling";

XSpace snapshot_space(const AgentProcess& agent) {
  std::string bytes;
  const grpc::Status status = raw_call(agent, kSnapshot, "", bytes);
  EXPECT_TRUE(status.ok()) << status.error_message();
  // The response read back field by field: field 8 (length-delimited) is the XSpace.
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  XSpace space;
  for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
    if (tag == google::protobuf::internal::WireFormatLite::MakeTag(
                   8, google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
      uint32_t length = 0;
      in.ReadVarint32(&length);
      std::string xspace_bytes;
      in.ReadString(&xspace_bytes, static_cast<int>(length));
      EXPECT_TRUE(space.ParseFromString(xspace_bytes));
    } else {
      google::protobuf::internal::WireFormatLite::SkipField(&in, tag);
    }
  }
  return space;
}

absl::StatusOr<podscope::v1::RecordedWindowResponse> recorded_window(const AgentProcess& agent, int64_t last_ms,
                                                                     std::chrono::seconds deadline = 10s) {
  auto stub = podscope::v1::Agent::NewStub(agent.channel());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  podscope::v1::RecordedWindowRequest request;
  request.set_last_ms(last_ms);
  podscope::v1::RecordedWindowResponse response;
  const grpc::Status status = stub->GetRecordedWindow(&context, request, &response);
  if (!status.ok()) return to_absl_status(status, "GetRecordedWindow");
  return response;
}

// Ranks register before their ring is up and their first step ends: wait until the recorder holds steps of both, so
// that the waits which follow measure recording, not start-up (seconds on a loaded box).
bool both_ranks_recorded_a_step(const AgentProcess& agent) {
  return wait_for(
      [&] {
        absl::StatusOr<podscope::v1::RecordedWindowResponse> window = recorded_window(agent, 10000);
        XSpace space;
        return window.ok() && space.ParseFromString(window->xspace()) && steps_by_core(space).size() == 2;
      },
      30s);
}

TEST(FlightRecorder, LastWindowReturnsTheRecentStepsOfEveryRankAtOnce) {
  AgentProcess agent({"--sample_interval_ms", "100", "--flight_recorder_seconds", "10"});
  auto ranks = start_ranks(2, agent.socket_dir() + "/agent.sock");
  ASSERT_TRUE(wait_for([&] { return agent_status(agent).clients_size() == 2; }, 10s)) << agent.output();
  ASSERT_TRUE(both_ranks_recorded_a_step(agent)) << agent.output();
  std::this_thread::sleep_for(3s);

  const auto asked = std::chrono::steady_clock::now();
  absl::StatusOr<podscope::v1::RecordedWindowResponse> window = recorded_window(agent, 2000);
  const auto answered = std::chrono::steady_clock::now();
  ASSERT_TRUE(window.ok()) << window.status();
  EXPECT_LT(answered - asked, 3s);
  EXPECT_NEAR(static_cast<double>(window->end_ns() - window->start_ns()), 2e9, 1e6);
  EXPECT_EQ(window->whole_since_ns(), window->start_ns()) << "two fast ranks' 2 s fit the default 64 MiB";
  XSpace space;
  ASSERT_TRUE(space.ParseFromString(window->xspace()));
  for (const auto& w : space.warnings()) EXPECT_EQ(w.find("holds"), std::string::npos) << w;
  const auto steps = steps_by_core(space);
  ASSERT_EQ(steps.size(), 2u) << agent.output();
  for (const auto& [core, list] : steps) {
    ASSERT_GE(list.size(), 5u) << "core " << core;
    EXPECT_GE(list.back().second - list.front().first, 1'800'000'000) << "core " << core;
  }
  bool says_left_out = false;
  for (const auto& w : space.warnings()) says_left_out |= w.find("cannot look back") != std::string::npos;
  EXPECT_TRUE(says_left_out);

  const podscope::v1::AgentStatus status = agent_status(agent);
  EXPECT_TRUE(status.flight_recorder().on());
  EXPECT_EQ(status.flight_recorder().window_ms(), 10000);
  EXPECT_GT(status.flight_recorder().held_events(), 0u);
  ASSERT_EQ(status.flight_recorder().processes_size(), 2);
  for (const auto& p : status.flight_recorder().processes()) {
    EXPECT_GE(p.held_seconds(), 2.0) << "pid " << p.pid() << ": recording since before the window";
    EXPECT_LE(p.held_seconds(), 10.0) << "pid " << p.pid();
    EXPECT_GT(p.held_events(), 0u);
  }
}

TEST(FlightRecorder, ContinuousProfilingCallsAtTensorFlowsFieldNumbers) {
  AgentProcess agent({"--sample_interval_ms", "100", "--flight_recorder_seconds", "10"});
  auto ranks = start_ranks(2, agent.socket_dir() + "/agent.sock");
  ASSERT_TRUE(wait_for([&] { return agent_status(agent).clients_size() == 2; }, 10s)) << agent.output();
  ASSERT_TRUE(both_ranks_recorded_a_step(agent)) << agent.output();
  std::this_thread::sleep_for(1500ms);

  // Recording from the start: a second session is refused, as TSL refuses one.
  std::string response;
  EXPECT_EQ(raw_call(agent, kStart, testing::varint_field(1, 5000), response).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);

  // The first snapshot holds the window so far; the next one only what came after it.
  const auto first = steps_by_core(snapshot_space(agent));
  ASSERT_EQ(first.size(), 2u);
  std::this_thread::sleep_for(700ms);
  const auto second = steps_by_core(snapshot_space(agent));
  ASSERT_EQ(second.size(), 2u);
  for (const auto& [core, list] : first) {
    ASSERT_FALSE(second.at(core).empty());
    EXPECT_GE(list.back().second - list.front().first, 1'000'000'000) << "core " << core;
    // A step running across the snapshot's end is in both; nothing earlier is in the second.
    EXPECT_GE(second.at(core).front().first, list.back().first) << "core " << core;
  }

  EXPECT_TRUE(raw_call(agent, kStop, "", response).ok());
  EXPECT_EQ(raw_call(agent, kStop, "", response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(raw_call(agent, kSnapshot, "", response).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_FALSE(agent_status(agent).flight_recorder().on());

  // Started again with the request's duration (field 1) as its window.
  ASSERT_TRUE(raw_call(agent, kStart, testing::varint_field(1, 4000), response).ok());
  EXPECT_EQ(agent_status(agent).flight_recorder().window_ms(), 4000);
  std::this_thread::sleep_for(800ms);
  EXPECT_EQ(steps_by_core(snapshot_space(agent)).size(), 2u) << agent.output();
}

TEST(FlightRecorder, SnapshotsDuringAProfileLeaveItWholeAndRecordingGoesOn) {
  AgentProcess agent({"--sample_interval_ms", "100", "--flight_recorder_seconds", "10"});
  auto ranks = start_ranks(2, agent.socket_dir() + "/agent.sock");
  ASSERT_TRUE(wait_for([&] { return agent_status(agent).clients_size() == 2; }, 10s)) << agent.output();
  ASSERT_TRUE(both_ranks_recorded_a_step(agent)) << agent.output();
  std::this_thread::sleep_for(500ms);

  XSpace profiled;
  std::thread profile([&] {
    const testing::ProfileOutcome out = testing::profile(agent, testing::profile_request(1500));
    EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    profiled = out.response.xspace();
  });
  std::this_thread::sleep_for(500ms);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(steps_by_core(snapshot_space(agent)).size(), 2u);
    std::this_thread::sleep_for(200ms);
  }
  profile.join();

  // The Profile has every rank's steps over its whole duration, none missing.
  const auto steps = steps_by_core(profiled);
  ASSERT_EQ(steps.size(), 2u) << agent.output();
  for (const auto& [core, list] : steps) EXPECT_GE(list.back().second - list.front().first, 1'200'000'000);

  // Recording went on through the Profile and after it: the whole recorded window holds steps that came after
  // the Profile's last. Compared with the Profile's own steps, not the clock, so a slow box passes too.
  std::this_thread::sleep_for(1s);
  absl::StatusOr<podscope::v1::RecordedWindowResponse> window = recorded_window(agent, 10000);
  ASSERT_TRUE(window.ok()) << window.status();
  XSpace recorded;
  ASSERT_TRUE(recorded.ParseFromString(window->xspace()));
  const auto recorded_steps = steps_by_core(recorded);
  ASSERT_EQ(recorded_steps.size(), 2u) << agent.output();
  for (const auto& [core, list] : recorded_steps) {
    EXPECT_GT(list.back().first, steps.at(core).back().second + 500'000'000) << "core " << core;
  }
}

TEST(FlightRecorder, WindowWithTheRecorderOffFailsNamingTheFlag) {
  AgentProcess agent({"--sample_interval_ms", "100"});
  absl::StatusOr<podscope::v1::RecordedWindowResponse> window = recorded_window(agent, 1000);
  ASSERT_FALSE(window.ok());
  EXPECT_EQ(window.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(window.status().message().find("flight_recorder_seconds"), std::string::npos) << window.status();
  EXPECT_FALSE(agent_status(agent).flight_recorder().on());
  std::string response;
  EXPECT_EQ(raw_call(agent, kSnapshot, "", response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(FlightRecorder, FloodStaysUnderTheMemoryCapAndCountsWhatItDropped) {
  constexpr int64_t kCapMb = 4;
  AgentProcess agent({"--sample_interval_ms", "100", "--flight_recorder_seconds", "60", "--flight_recorder_max_mb",
                      std::to_string(kCapMb)});
  const std::string socket = agent.socket_dir() + "/agent.sock";
  testing::FloodProcess flood_a(socket, 0, 1, 9), flood_b(socket, 1, 1, 9);
  ASSERT_TRUE(wait_for([&] { return agent_status(agent).clients_size() == 2; }, 10s)) << agent.output();
  ASSERT_TRUE(wait_for([&] { return agent_status(agent).flight_recorder().dropped_events() > 0; }, 20s))
      << agent.output();
  const podscope::v1::FlightRecorderStatus recorder = agent_status(agent).flight_recorder();
  EXPECT_LE(recorder.held_bytes(), recorder.max_bytes());
  EXPECT_EQ(recorder.max_bytes(), static_cast<uint64_t>(kCapMb) << 20);
  EXPECT_GT(recorder.held_events(), 1000u);
  EXPECT_LE(static_cast<double>(recorder.held_bytes()) / static_cast<double>(recorder.held_events()), 48.0)
      << "bytes held per event";
  ASSERT_EQ(recorder.processes_size(), 2);
  for (const auto& p : recorder.processes()) EXPECT_LT(p.held_seconds(), 60.0) << "pid " << p.pid();

  // A window longer than the cap holds says the span it holds whole, and warns.
  absl::StatusOr<podscope::v1::RecordedWindowResponse> window = recorded_window(agent, 60000);
  ASSERT_TRUE(window.ok()) << window.status();
  EXPECT_GT(window->whole_since_ns(), window->start_ns());
  XSpace space;
  ASSERT_TRUE(space.ParseFromString(window->xspace()));
  ASSERT_FALSE(steps_by_core(space).empty());
  bool warned = false;
  for (const auto& w : space.warnings())
    warned |= w.find("holds") != std::string::npos && w.find("flight_recorder_max_mb") != std::string::npos;
  EXPECT_TRUE(warned) << [&] {
    std::string all;
    for (const auto& w : space.warnings()) all += w + "\n";
    return all;
  }();
  EXPECT_TRUE(wait_for(
      [&] {
        const std::string metrics = testing::http_get(agent.metrics_port(), "/metrics");
        const size_t at = metrics.find("podscope_flight_recorder_dropped_events_total{");
        return at != std::string::npos && metrics.find("} 0\n", at) != metrics.find('}', at);
      },
      3s));
}

TEST(FlightRecorder, WindowsAskedInParallelAreBuiltOneAtATimeAndTheirMemoryIsReturned) {
#ifdef PODSCOPE_SANITIZED
  GTEST_SKIP() << "measures the agent's RSS, which ASan's shadow memory and quarantine inflate";
#endif
  AgentProcess agent(
      {"--sample_interval_ms", "100", "--flight_recorder_seconds", "60", "--flight_recorder_max_mb", "8"});
  const std::string socket = agent.socket_dir() + "/agent.sock";
  testing::FloodProcess flood_a(socket, 0, 1, 9), flood_b(socket, 1, 1, 9);
  ASSERT_TRUE(wait_for([&] { return agent_status(agent).flight_recorder().dropped_events() > 0; }, 30s))
      << agent.output();
  auto rss_kib = [&] { return testing::status_kib(agent.pid(), "VmRSS"); };
  auto whole_window = [&] { return recorded_window(agent, 60000, 60s); };

  // One window alone: what one build of the full recorder costs, then given back.
  const auto first = whole_window();
  ASSERT_TRUE(first.ok());
  const int64_t answer_kib = static_cast<int64_t>(first->xspace().size()) / 1024;
  std::this_thread::sleep_for(2500ms);  // the agent returns a finished build's memory within a second
  int64_t before_kib = rss_kib();
  testing::reset_peak_rss(agent.pid());
  ASSERT_TRUE(whole_window().ok());
  const int64_t one_kib = testing::status_kib(agent.pid(), "VmHWM") - before_kib;
  std::this_thread::sleep_for(2500ms);

  // Eight at once: built in turn (or, past the queue's wait, refused and counted): the agent peaks at one build
  // and the answers on their way, not eight builds.
  before_kib = rss_kib();
  testing::reset_peak_rss(agent.pid());
  std::vector<absl::Status> answers(8);
  {
    std::vector<std::thread> callers;
    for (auto& answer : answers) callers.emplace_back([&] { answer = whole_window().status(); });
    for (auto& c : callers) c.join();
  }
  const int64_t eight_kib = testing::status_kib(agent.pid(), "VmHWM") - before_kib;
  int built = 0;
  for (const absl::Status& a : answers) {
    EXPECT_TRUE(a.ok() || a.code() == absl::StatusCode::kResourceExhausted) << a;
    built += a.ok();
  }
  EXPECT_GE(built, 1);
  // A build writes its planes as it goes and gRPC sends those bytes without a copy: one build's peak (and the heap
  // of the one before), two answers on their way, never eight builds.
  EXPECT_LE(eight_kib, 2 * one_kib + 2 * answer_kib + 16 * 1024)
      << "one build grew the agent by " << one_kib / 1024 << " MiB, eight asked at once by " << eight_kib / 1024;
  // And the memory comes back: the agent trims its heap after a build and again once each large answer is sent.
  // Measured 8-14 MiB kept after eight 36 MiB answers, where an agent that trimmed only after builds kept 31. The
  // recorder is full: what it holds does not grow.
  EXPECT_TRUE(wait_for([&] { return rss_kib() < before_kib + answer_kib / 2 + 8 * 1024; }, 10s))
      << "RSS " << rss_kib() / 1024 << " MiB, " << before_kib / 1024 << " MiB before the windows";
  std::printf(
      "full-recorder window (8 MiB cap): one build +%lld MiB peak, eight in parallel +%lld MiB, %d built, answer "
      "%lld MiB; then +%lld MiB kept\n",
      static_cast<long long>(one_kib / 1024), static_cast<long long>(eight_kib / 1024), built,
      static_cast<long long>(answer_kib / 1024), static_cast<long long>((rss_kib() - before_kib) / 1024));
}

TEST(FlightRecorder, StatusAnswersWhileAWindowOfTheWholeRecorderIsBuilt) {
  AgentProcess agent(
      {"--sample_interval_ms", "100", "--flight_recorder_seconds", "60", "--flight_recorder_max_mb", "16"});
  const std::string socket = agent.socket_dir() + "/agent.sock";
  testing::FloodProcess flood_a(socket, 0, 1, 9), flood_b(socket, 1, 1, 9);
  ASSERT_TRUE(wait_for([&] { return agent_status(agent).flight_recorder().dropped_events() > 0; }, 60s))
      << agent.output();
  auto whole_window = [&] { return recorded_window(agent, 60000, 60s); };
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto began = std::chrono::steady_clock::now();
  ASSERT_TRUE(whole_window().ok());
  const double alone_s = seconds_since(began);

  // A second build, and status asked all along it: each answer comes while the build goes on, not after it.
  std::atomic<bool> built = false;
  began = std::chrono::steady_clock::now();
  std::thread window([&] {
    EXPECT_TRUE(whole_window().ok());
    built = true;
  });
  double slowest_status_s = 0;
  int answered = 0;
  while (!built) {
    const auto asked = std::chrono::steady_clock::now();
    agent_status(agent);
    slowest_status_s = std::max(slowest_status_s, seconds_since(asked));
    ++answered;
    std::this_thread::sleep_for(20ms);
  }
  window.join();
  const double build_s = seconds_since(began);
  std::printf("window of the whole recorder: %.2f s alone, %.2f s with status asked %d times; slowest status %.3f s\n",
              alone_s, build_s, answered, slowest_status_s);
  // A build that stalled status would hold it for most of the build.
  EXPECT_LT(slowest_status_s, std::max(0.5, build_s / 3)) << "status waited for the build";
}

absl::StatusOr<podscope::v1::RecordedWindowResponse> stored_snapshot(const AgentProcess& agent, const std::string& id) {
  auto stub = podscope::v1::Agent::NewStub(agent.channel());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 10s);
  podscope::v1::StoredSnapshotRequest request;
  request.set_id(id);
  podscope::v1::RecordedWindowResponse response;
  const grpc::Status status = stub->GetStoredSnapshot(&context, request, &response);
  if (!status.ok()) return to_absl_status(status, "GetStoredSnapshot");
  return response;
}

TEST(FlightRecorder, SlowStepsFreezeSnapshotsKeptWithinTheLimitsAndServedById) {
  const std::string root = ::testing::TempDir() + "/triggered_" + std::to_string(::getpid());
  std::filesystem::remove_all(root);
  // Cool-down 0: each of the 4 slow steps triggers (on one rank or both); 2 snapshots stay in memory, all on disk.
  // No warm-up: step 100 comes well within ring_trainer's first seconds.
  AgentProcess agent({"--sample_interval_ms", "100", "--flight_recorder_seconds", "10", "--trigger_cooldown_s", "0",
                      "--trigger_warmup_s", "0", "--trigger_step_factor", "20", "--flight_recorder_max_snapshots", "2",
                      "--repository_root", root});
  // Slow by a second: far past 20 medians of ring_trainer's steps (2-5 ms, about 20 ms in the instrumented build).
  auto ranks = start_ranks(2, agent.socket_dir() + "/agent.sock", {"--slow_steps", "100:4:1000", "--slow_rank", "0"});
  // A loaded host's jitter may trigger too: the slow steps are told by their numbers.
  auto slow_steps_stored = [&agent] {
    std::set<int64_t> steps;
    const podscope::v1::AgentStatus status = agent_status(agent);
    for (const auto& s : status.flight_recorder().snapshots()) {
      if (s.step_num() >= 100 && s.step_num() < 104) steps.insert(s.step_num());
    }
    return steps.size();
  };
  ASSERT_TRUE(wait_for([&] { return agent_status(agent).clients_size() == 2; }, 10s)) << agent.output();
  ASSERT_TRUE(wait_for([&] { return slow_steps_stored() == 4; }, 60s))
      << agent_status(agent).flight_recorder().DebugString();
  const podscope::v1::FlightRecorderStatus recorder = agent_status(agent).flight_recorder();
  ASSERT_EQ(recorder.snapshots_size(), static_cast<int>(recorder.snapshots_triggered())) << "each is still on disk";
  EXPECT_EQ(recorder.snapshots_deleted(), 0u);
  std::vector<podscope::v1::StoredSnapshot> slow;
  for (const podscope::v1::StoredSnapshot& s : recorder.snapshots()) {
    EXPECT_EQ(s.reason(), "slow_step");
    EXPECT_GT(s.step_ns(), 20 * s.median_ns());
    EXPECT_TRUE(std::filesystem::exists(s.path())) << s.path();
    EXPECT_EQ(std::filesystem::file_size(s.path()), s.bytes());
    if (s.step_num() >= 100 && s.step_num() < 104) slow.push_back(s);
  }
  ASSERT_GE(slow.size(), 4u) << "4 slow steps, each seen by one rank or both";
  ASSERT_GE(recorder.snapshots_size(), 3) << "more than flight_recorder_max_snapshots, still listed from disk";

  // The oldest (out of memory, read back from disk) and the newest hold the slow step of their trigger.
  for (const podscope::v1::StoredSnapshot& s : {recorder.snapshots(0), slow.back()}) {
    absl::StatusOr<podscope::v1::RecordedWindowResponse> served = stored_snapshot(agent, s.id());
    ASSERT_TRUE(served.ok()) << served.status();
    XSpace space;
    ASSERT_TRUE(space.ParseFromString(served->xspace()));
    EXPECT_EQ(served->xspace().size(), s.bytes());
    bool holds_the_slow_step = false;
    for (const auto& [core, steps] : steps_by_core(space)) {
      for (const auto& [begin, end] : steps) {
        const bool same_end = std::abs(end - s.step_end_ns()) < 1'000'000;
        holds_the_slow_step |= same_end && std::abs(end - begin - s.step_ns()) < 1'000;
      }
    }
    EXPECT_TRUE(holds_the_slow_step) << s.id();
  }
  EXPECT_EQ(stored_snapshot(agent, "no_such_snapshot").status().code(), absl::StatusCode::kNotFound);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace podscope
