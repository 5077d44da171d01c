// The capture library against real gRPC servers on loopback (LightweightAgent), with injected clock offsets.
#include "pod_capture/capture.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <thread>

#include "daemon/run_name.h"
#include "trace_writers/merged_trace.h"
#include "pod_capture/monitor.h"
#include "pod_capture/capture_files.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"
#include "tests/pod_capture/lightweight_agent.h"
#include "tests/pod_capture/lightweight_pod.h"
#include "tests/scratch_directory.h"
#include "tests/trace_writers/gzip_reader.h"

namespace podscope::pod_capture {
namespace {

using testing::LightweightAgent;
using testing::LightweightAgentOptions;
using testing::TimerThread;
using Pod = testing::LightweightPod;
using testing::gunzip_file;

CaptureSpec quick_spec(int64_t duration_ms = 300) {
  CaptureSpec spec;
  spec.duration_ms = duration_ms;
  spec.num_tracing_attempts = 3;
  spec.session_id = tf_run_name(Clock().now_ns());
  return spec;
}

TEST(ServiceAddresses, StripsGrpcPrefixAndRejectsBadEntries) {
  auto parsed = parse_service_addresses("grpc://10.0.0.1:8466, host-b:7000");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, (std::vector<std::string>{"10.0.0.1:8466", "host-b:7000"}));
  EXPECT_EQ(host_file_stem("10.0.0.1:8466"), "10.0.0.1_8466");
  auto no_port = parse_service_addresses("a:1,hostonly");
  ASSERT_FALSE(no_port.ok());
  EXPECT_NE(std::string(no_port.status().message()).find("\"hostonly\" has no port"), std::string::npos);
  EXPECT_FALSE(parse_service_addresses("a:1,,b:2").ok());
  EXPECT_FALSE(parse_service_addresses("a:1,grpc://a:1").ok()) << "the same agent twice would collide with itself";
}

// The main property: four hosts with skewed clocks are captured at one instant and merged onto one clock.
TEST(Capture, SynchronizesFourHostsWithSkewedClocksAndMergesTheirSteps) {
  Pod pod;
  const std::vector<int64_t> offsets = {0, 5'000'000, -3'000'000, 20'000'000};
  for (size_t i = 0; i < offsets.size(); ++i) {
    pod.add({.host_name = "host" + std::to_string(i), .clock_offset_ns = offsets[i]});
  }
  std::vector<std::string> progress;
  CaptureResult result =
      run_capture(pod.targets(), quick_spec(), Clock(), [&](const std::string& line) { progress.push_back(line); });
  ASSERT_EQ(result.exit_code(), 0);
  EXPECT_EQ(result.attempts, 1);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress[0], "Starting to trace for 300 ms. Remaining attempt(s): 2");
  for (size_t i = 0; i < offsets.size(); ++i) {
    const HostCapture& host = result.hosts[i];
    EXPECT_EQ(host.host_name, "host" + std::to_string(i));
    ASSERT_EQ(host.clock_before.kind, ClockMeasurement::kMeasured);
    const int64_t error = std::abs(host.clock_before.estimate.offset_ns - offsets[i]);
    EXPECT_LE(error, std::max<int64_t>(100'000, host.clock_before.estimate.error_bound_ns)) << host.address;
  }
  // Every agent started within 2 ms of the others on the system clock (they share one machine).
  std::vector<int64_t> starts;
  for (auto& agent : pod.agents) starts.push_back(agent->actual_starts_system_ns().at(0));
  const auto [lo, hi] = std::minmax_element(starts.begin(), starts.end());
  EXPECT_LT(*hi - *lo, 2'000'000);
  ASSERT_TRUE(result.start_skew_ns.has_value());
  EXPECT_LT(*result.start_skew_ns, 2'000'000);

  const testing::ScratchDirectory scratch("capture_sync");
  const std::filesystem::path& logdir = scratch.path();
  auto run = write_run_directory(logdir, result);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::filesystem::path run_dir = run->local_path();
  EXPECT_EQ(run_dir, logdir / "plugins" / "profile" / result.session_id);
  int xplane_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir)) {
    if (entry.path().string().ends_with(".xplane.pb")) ++xplane_files;
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << "leftover temp file " << entry.path();
  }
  EXPECT_EQ(xplane_files, 4);
  EXPECT_TRUE(std::filesystem::exists(run_dir / "capture.json"));

  // Each host file keeps its own clock and records the measured offset.
  tensorflow::profiler::XSpace space;
  std::ifstream in(run_dir / (pod.connections[3]->file_stem + ".xplane.pb"), std::ios::binary);
  ASSERT_TRUE(space.ParseFromIstream(&in));
  xspace::XPlaneReader plane(space.planes(0));
  EXPECT_NEAR(static_cast<double>(plane.int_stat(xspace::kClockOffsetStat).value()), 20e6, 1e5);
  EXPECT_TRUE(plane.int_stat(xspace::kClockRttStat).has_value());

  // In the merged trace the end of one step agrees across hosts (it differs by up to 23 ms unmerged).
  const std::string trace = gunzip_file(run_dir / "pod.trace.json.gz");
  const std::regex step_event(
      R"re("name":"train_step","ts":(\d+)\.(\d+),"dur":(\d+)\.(\d+),"args":\{"step_num":(\d+)\})re");
  std::map<int64_t, std::vector<int64_t>> ends_by_step;
  for (auto it = std::sregex_iterator(trace.begin(), trace.end(), step_event); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    const int64_t ts = std::stoll(m[1]) * 1000 + std::stoll(m[2]);
    const int64_t dur = std::stoll(m[3]) * 1000 + std::stoll(m[4]);
    ends_by_step[std::stoll(m[5])].push_back(ts + dur);
  }
  int compared = 0;
  for (const auto& [step, ends] : ends_by_step) {
    if (ends.size() != 4) continue;
    const auto [a, b] = std::minmax_element(ends.begin(), ends.end());
    EXPECT_LT(*b - *a, 1'000'000) << "step " << step;
    ++compared;
  }
  EXPECT_GE(compared, 10);
}

TEST(Capture, PlainTensorFlowServerGetsOffsetZeroAndAWarning) {
  Pod pod;
  pod.add({.host_name = "tf", .clock_offset_ns = 0, .ping_rpc = false});
  CaptureResult result = run_capture(pod.targets(), quick_spec(100), Clock(), [](const std::string&) {});
  EXPECT_EQ(result.exit_code(), 0);
  EXPECT_EQ(result.hosts[0].clock_before.kind, ClockMeasurement::kNoPingRpc);
  EXPECT_EQ(result.hosts[0].clock_before.estimate.offset_ns, 0);
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_NE(result.warnings[0].find("no podscope ping RPC"), std::string::npos);
}

TEST(Capture, RetriesEveryHostWithANewStartAfterAnUnavailableHost) {
  Pod pod;
  pod.add({.host_name = "steady"});
  pod.add({.host_name = "flaky", .failing_profiles = 1});
  std::vector<std::string> progress;
  CaptureResult result =
      run_capture(pod.targets(), quick_spec(100), Clock(), [&](const std::string& line) { progress.push_back(line); });
  EXPECT_EQ(result.exit_code(), 0);
  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(result.kept_attempt, 2);
  EXPECT_EQ(pod.agents[0]->profile_calls(), 2) << "the retry goes to every host";
  ASSERT_GE(progress.size(), 3u);
  EXPECT_EQ(progress[2], "Starting to trace for 100 ms. Remaining attempt(s): 1");
}

TEST(Capture, AnAnswerWhoseXSpaceDoesNotParseIsNamedAndTheOthersAreKept) {
  Pod pod;
  pod.add({.host_name = "steady"});
  // Its XSpace names its host in bytes that are not UTF-8: protobuf writes them (with a logged error) and no reader
  // parses them back.
  pod.add({.host_name = "broken\xff\xfe"});
  CaptureResult result = run_capture(pod.targets(), quick_spec(100), Clock(), [](const std::string&) {});
  EXPECT_EQ(result.exit_code(), 3);
  EXPECT_EQ(result.attempts, 1) << "a space that does not parse is not worth another attempt";
  EXPECT_TRUE(result.hosts[0].ok);
  EXPECT_FALSE(result.hosts[1].ok);
  EXPECT_TRUE(result.hosts[1].xspace.empty());
  EXPECT_EQ(result.hosts[1].error, "Profile failed (15): the answer's XSpace does not parse");
}

TEST(Capture, RetriesWhenNoHostCollectedAnything) {
  Pod pod;
  pod.add({.host_name = "idle", .empty_trace = true});
  std::vector<std::string> progress;
  auto spec = quick_spec(50);
  spec.num_tracing_attempts = 2;
  CaptureResult result =
      run_capture(pod.targets(), spec, Clock(), [&](const std::string& line) { progress.push_back(line); });
  EXPECT_EQ(result.exit_code(), 1);
  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(result.kept_attempt, 1) << "ties keep the first attempt";
  EXPECT_NE(std::find(progress.begin(), progress.end(), "No trace event is collected. Automatically retrying."),
            progress.end());
  EXPECT_NE(progress.back().find("--num_tracing_attempts"), std::string::npos);
  EXPECT_EQ(result.hosts[0].error, "no trace event was collected");
}

TEST(Capture, HostKilledMidCaptureIsNamedAndTheOthersAreWritten) {
  Pod pod;
  for (int i = 0; i < 3; ++i) pod.add({.host_name = "host" + std::to_string(i)});
  auto spec = quick_spec(600);
  spec.num_tracing_attempts = 1;
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    pod.agents[1]->shutdown();
  });
  CaptureResult result = run_capture(pod.targets(), spec, Clock(), [](const std::string&) {});
  killer.join();
  EXPECT_EQ(result.exit_code(), 3);
  EXPECT_TRUE(result.hosts[0].ok);
  EXPECT_FALSE(result.hosts[1].ok);
  EXPECT_NE(result.hosts[1].error.find("Profile failed"), std::string::npos) << result.hosts[1].error;
  const testing::ScratchDirectory scratch("capture_killed");
  const std::filesystem::path& logdir = scratch.path();
  auto run = write_run_directory(logdir, result);
  ASSERT_TRUE(run.ok());
  const std::filesystem::path run_dir = run->local_path();
  EXPECT_TRUE(std::filesystem::exists(run_dir / (pod.connections[0]->file_stem + ".xplane.pb")));
  EXPECT_FALSE(std::filesystem::exists(run_dir / (pod.connections[1]->file_stem + ".xplane.pb")));
  EXPECT_TRUE(std::filesystem::exists(run_dir / (pod.connections[2]->file_stem + ".xplane.pb")));
  const std::string summary = capture_summary_text(result, run->location());
  EXPECT_NE(summary.find(pod.connections[1]->file_stem + " (" + pod.connections[1]->file_stem + "): FAILED"),
            std::string::npos)
      << summary;
}

TEST(Capture, NothingListeningIsRetriedThenReportedClearly) {
  // A port that was free a moment ago: bind, read it back, close.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  auto dead = connect_agent("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), grpc::InsecureChannelCredentials());
  std::vector<std::string> progress;
  CaptureResult result =
      run_capture({dead.get()}, quick_spec(100), Clock(), [&](const std::string& line) { progress.push_back(line); });
  EXPECT_EQ(result.exit_code(), 1);
  EXPECT_EQ(std::count_if(progress.begin(), progress.end(),
                          [](const std::string& l) { return l.starts_with("Starting to trace"); }),
            3);
  EXPECT_NE(result.hosts[0].error.find("not asked to capture: unreachable at the clock sync"), std::string::npos)
      << result.hosts[0].error;
  EXPECT_NE(result.hosts[0].error.find("Connection refused"), std::string::npos) << result.hosts[0].error;
  EXPECT_EQ(result.hosts[0].clock_before.kind, ClockMeasurement::kUnreachable);
}

TEST(Capture, AnAgentThatNeverAnswersCostsOnePingTimeoutAndTheRestAreKept) {
  // A listener that never accepts: the TCP connection completes in the kernel's backlog and nothing is ever said.
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto silent = connect_agent("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), grpc::InsecureChannelCredentials());
  Pod pod;
  pod.add({.host_name = "answering"});
  std::vector<AgentConnection*> targets = pod.targets();
  targets.push_back(silent.get());
  CaptureSpec spec = quick_spec(200);
  spec.num_tracing_attempts = 1;
  const auto start = std::chrono::steady_clock::now();
  const CaptureResult result = run_capture(targets, spec, Clock(), [](const std::string&) {});
  const auto took = std::chrono::steady_clock::now() - start;
  close(fd);
  EXPECT_EQ(result.exit_code(), 3);
  EXPECT_TRUE(result.hosts[0].ok) << result.hosts[0].error;
  EXPECT_NE(result.hosts[1].error.find("not asked to capture: unreachable at the clock sync"), std::string::npos)
      << result.hosts[1].error;
  // The silent agent's 1 s ping timeout beside a 200 ms capture, with room for a loaded box; it was never asked
  // to Profile, so the capture's deadline (answer_wait_ms) never comes into it.
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(ClockBurst, ManyAgentsSharingAWindowOfPingsAreEachMeasuredWithinTheirBound) {
  // 128 agents with clocks up to 50 ms off, pinged through one completion queue 16 at a time: however long a ping
  // waits behind the others on this (possibly loaded) box, the estimate stays within its bound of the truth.
  Pod pod;
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> offset(-50'000'000, 50'000'000);
  std::vector<int64_t> offsets;
  for (int i = 0; i < 128; ++i) {
    offsets.push_back(offset(rng));
    pod.add({.host_name = "agent" + std::to_string(i), .clock_offset_ns = offsets.back()});
  }
  for (auto& c : pod.connections)
    c->channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const std::vector<ClockMeasurement> clocks =
      measure_clocks(pod.targets(), Clock(), 16, 2000, {.max_in_flight = 16}).clocks;
  ASSERT_EQ(clocks.size(), offsets.size());
  for (size_t i = 0; i < clocks.size(); ++i) {
    ASSERT_EQ(clocks[i].kind, ClockMeasurement::kMeasured) << clocks[i].detail;
    EXPECT_GE(clocks[i].exchanges.size(), 1u);
    EXPECT_LE(std::abs(clocks[i].estimate.offset_ns - offsets[i]), clocks[i].estimate.error_bound_ns)
        << "agent " << i << ": rtt " << clocks[i].estimate.rtt_ns;
    // Loopback round trips: well under a millisecond unless the box stalls this process for long.
    EXPECT_LT(clocks[i].estimate.error_bound_ns, 20'000'000) << "agent " << i;
  }
}

// Adds one agent a clock offset of `offsets`, each 1 ms away each way with `jitter_ns` of jitter, its pings carried on
// `path`; returns once every agent's channel is connected.
void add_distant_agents(Pod& pod, const std::vector<int64_t>& offsets, int64_t jitter_ns, TimerThread& path) {
  for (size_t i = 0; i < offsets.size(); ++i) {
    pod.add({.host_name = "agent" + std::to_string(i),
             .clock_offset_ns = offsets[i],
             .path_timers = &path,
             .ping_request_delay_ns = 1'000'000,
             .ping_response_delay_ns = 1'000'000,
             .ping_jitter_ns = jitter_ns});
  }
  for (auto& c : pod.connections)
    c->channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

TEST(ClockBurst, AcrossANetworkTheWindowGrowsAndEveryEstimateStaysWithinItsBound) {
  // 64 agents 1 ms away each way (± 50 µs), their paths on sleeping timers that cost this process no CPU while a
  // ping travels: a window sized from the RTTs holds several pings at once, and each estimate is as good as the
  // path allows: within its bound, and near the truth.
  TimerThread path(TimerThread::Wait::kSleeping);  // outlives the agents whose pings it carries
  Pod pod;
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> offset(-50'000'000, 50'000'000);
  std::vector<int64_t> offsets;
  for (int i = 0; i < 64; ++i) offsets.push_back(offset(rng));
  add_distant_agents(pod, offsets, 50'000, path);
  const ClockBurst burst =
      measure_clocks(pod.targets(), Clock(), 16, 2000, {.max_in_flight = 16, .sized_from_rtts = true});
  // A 2 ms round trip holds the sending of many pings, even on a loaded box.
  EXPECT_GT(burst.largest_window, 1) << "client time per ping " << burst.client_ns_per_ping << " ns";
  ASSERT_EQ(burst.clocks.size(), offsets.size());
  std::vector<int64_t> errors;
  for (size_t i = 0; i < burst.clocks.size(); ++i) {
    const ClockMeasurement& clock = burst.clocks[i];
    ASSERT_EQ(clock.kind, ClockMeasurement::kMeasured) << clock.detail;
    errors.push_back(std::abs(clock.estimate.offset_ns - offsets[i]));
    EXPECT_LE(errors.back(), clock.estimate.error_bound_ns) << "agent " << i << ": rtt " << clock.estimate.rtt_ns;
  }
  // Symmetric paths: the error is the jitter's and the timers' wake-ups', a small part of the 1 ms bound.
  std::nth_element(errors.begin(), errors.begin() + errors.size() / 2, errors.end());
  EXPECT_LT(errors[errors.size() / 2], 250'000);
}

TEST(ClockBurst, ABurstThatWouldOutlastItsDeadlineGivesEachAgentAtMostFourPings) {
  // 32 agents 1 ms away with 200 µs of jitter each way, whose bursts settle slowly; the deadline has passed before
  // the burst begins. From its first sizing on (after 8 answers, all from the first agents) it trades pings for
  // time, and every estimate still holds its bound.
  TimerThread path(TimerThread::Wait::kSleeping);  // outlives the agents whose pings it carries
  Pod pod;
  std::vector<int64_t> offsets;
  for (int i = 0; i < 32; ++i) offsets.push_back(i * 1'000'000 - 16'000'000);
  add_distant_agents(pod, offsets, 200'000, path);
  const ClockBurst burst = measure_clocks(pod.targets(), Clock(), 16, 2000,
                                          {.max_in_flight = 16, .sized_from_rtts = true, .finish_by_ns = 1});
  EXPECT_TRUE(burst.fell_behind);
  ASSERT_EQ(burst.clocks.size(), offsets.size());
  for (size_t i = 0; i < burst.clocks.size(); ++i) {
    const ClockMeasurement& clock = burst.clocks[i];
    ASSERT_EQ(clock.kind, ClockMeasurement::kMeasured) << clock.detail;
    if (i >= 8) {
      EXPECT_LE(clock.exchanges.size(), kSettledExchanges) << "agent " << i;
    }
    EXPECT_LE(std::abs(clock.estimate.offset_ns - offsets[i]), clock.estimate.error_bound_ns) << "agent " << i;
  }
}

TEST(ClockBurst, ABurstCutShortKeepsWhatTheAgentsItWasPingingAnswered) {
  // 16 agents 1 ms away, pinged one at a time (up to 16 pings each), cut off once the second agent has had its first
  // pings, as a capture ends its second burst once the answers are in: the agents it had answered keep an estimate
  // within its bound, the rest none.
  TimerThread path(TimerThread::Wait::kSleeping);  // outlives the agents whose pings it carries
  Pod pod;
  std::vector<int64_t> offsets;
  for (int i = 0; i < 16; ++i) offsets.push_back(i * 1'000'000 - 8'000'000);
  add_distant_agents(pod, offsets, 200'000, path);
  Cancellation enough;
  std::thread cut([&] {
    // The probe's ping and two of the burst's.
    while (pod.agents[1]->ping_calls() < 3) std::this_thread::sleep_for(std::chrono::microseconds(200));
    enough.cancel();
  });
  const ClockBurst burst = measure_clocks(pod.targets(), Clock(), 16, 2000, {.cancellation = &enough});
  cut.join();
  ASSERT_EQ(burst.clocks.size(), offsets.size());
  size_t measured = 0;
  for (size_t i = 0; i < burst.clocks.size(); ++i) {
    const ClockMeasurement& clock = burst.clocks[i];
    if (clock.exchanges.empty()) {
      EXPECT_NE(clock.kind, ClockMeasurement::kMeasured) << "agent " << i;
      continue;
    }
    ++measured;
    ASSERT_EQ(clock.kind, ClockMeasurement::kMeasured) << "agent " << i << ": " << clock.detail;
    EXPECT_LE(std::abs(clock.estimate.offset_ns - offsets[i]), clock.estimate.error_bound_ns) << "agent " << i;
  }
  EXPECT_GE(measured, 1u);
  EXPECT_LT(measured, offsets.size()) << "the burst was not cut short";
}

TEST(FanOutMargin, CoversIssuingEveryCallAtTheMeasuredRate) {
  EXPECT_EQ(fanout_margin_ms(16, 0), 102);
  EXPECT_EQ(fanout_margin_ms(1024, 0), 228) << "never under 125 µs per agent";
  EXPECT_EQ(fanout_margin_ms(1024, 60'000), 228);
  // A client that took 200 µs per ping in the opening burst gets twice that per agent.
  EXPECT_EQ(fanout_margin_ms(1024, 200'000), 100 + 409);
}

TEST(Monitor, AggregatesStepTimesAcrossWorkers) {
  Pod pod;
  pod.add({.host_name = "fast", .step_period_ns = 10'000'000});
  pod.add({.host_name = "slow", .step_period_ns = 30'000'000});
  const auto names = worker_names(pod.targets());
  EXPECT_EQ(names, (std::vector<std::string>{"fast", "slow"}));
  auto results = monitor_round(pod.targets(), names, 50, 2, false);
  auto aggregate = aggregate_step_times(results);
  ASSERT_TRUE(aggregate.has_value());
  EXPECT_EQ(aggregate->workers, 2);
  EXPECT_DOUBLE_EQ(aggregate->avg_ms, 20.0);
  EXPECT_DOUBLE_EQ(aggregate->max_ms, 30.0);
  EXPECT_EQ(aggregate->slowest_worker, "slow");
  const std::string text = format_monitor_round(1, results);
  EXPECT_NE(text.find("Monitoring Results (Sample 1):"), std::string::npos);
  EXPECT_NE(text.find("slowest worker slow"), std::string::npos) << text;
  EXPECT_NE(text.find("Worker slow (" + pod.agents[1]->address() + "):"), std::string::npos) << text;
}

}  // namespace
}  // namespace podscope::pod_capture
