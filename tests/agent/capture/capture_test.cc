// CaptureSessions without sockets: one capture at a time, every way of ending it answers the same way,
// start times, repository paths and file names; which addresses a NewSession may reach; HostSeriesSource turns the
// series of a window into counter tracks.
#include "agent/capture/capture_session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <fstream>
#include <thread>

#include "agent/capture/fanout_targets.h"
#include "agent/capture/host_series_source.h"
#include "agent/capture/monitor_report.h"
#include "agent/series/series_store.h"
#include "daemon/run_name.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"
#include "tests/daemon/scoped_time_zone.h"
#include "tests/scratch_directory.h"

namespace podscope::agent {
namespace {

namespace fs = std::filesystem;

class CountingSource : public CaptureSource {
 public:
  std::string_view name() const override { return "counting"; }
  void open(const CaptureWindow& w) override {
    ++opened;
    window = w;
  }
  void close(int64_t end) override {
    ++closed;
    end_ns = end;
  }
  void collect(CaptureSpace& out) override {
    ++collected;
    xspace::XPlaneBuilder(xspace::find_or_add_plane(out.space(), "/device:CUSTOM:0"))
        .line_named("Steps")
        .add_event("step", window.start_ns, 1000);
  }
  std::atomic<int> opened = 0, closed = 0, collected = 0;
  CaptureWindow window;
  int64_t end_ns = 0;
};

struct Fixture {
  Clock clock;
  CountingSource source;
  RepositoryQuota quota{size_t{1} << 30};
  CaptureSessions sessions{clock, "host-x", [this] { return clock.now_ns(); }, quota};
  Fixture() {
    sessions.add_source(source);
    CaptureLimits limits;
    limits.max_duration_ms = 5000;
    sessions.set_limits(limits);
  }
};

tensorflow::ProfileRequest request(uint64_t ms, const std::string& id) {
  tensorflow::ProfileRequest r;
  r.set_duration_ms(ms);
  r.set_session_id(id);
  return r;
}

TEST(CaptureSessions, RunsOneWindowOverEverySource) {
  Fixture f;
  absl::StatusOr<CapturedSession> r = f.sessions.run(request(30, "a"), nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(f.source.opened, 1);
  EXPECT_EQ(f.source.closed, 1);
  EXPECT_EQ(f.source.collected, 1);
  EXPECT_GE(f.source.end_ns - f.source.window.start_ns, 30'000'000);
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(r->xspace));
  EXPECT_EQ(space.hostnames(0), "host-x");
  EXPECT_FALSE(r->empty_trace);
  EXPECT_EQ(f.source.window.request.opts().host_tracer_level(), 2u);  // TF defaults for version 0
  EXPECT_TRUE(f.source.window.request.opts().include_dataset_ops());
}

TEST(CaptureSessions, TerminateCancelAndShutdownAllEndThroughCloseAndCollect) {
  for (int way = 0; way < 3; ++way) {
    Fixture f;
    std::atomic<bool> cancelled{false};
    auto running = std::async(std::launch::async,
                              [&] { return f.sessions.run(request(4000, "s"), [&] { return cancelled.load(); }); });
    while (f.sessions.running_session() != "s" || f.source.opened == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(f.sessions.run(request(10, "t"), nullptr).status().code(), absl::StatusCode::kAlreadyExists);
    if (way == 0) {
      f.sessions.terminate("s");
    } else if (way == 1) {
      cancelled = true;
    } else {
      f.sessions.shutdown(2000);
    }
    absl::StatusOr<CapturedSession> r = running.get();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(f.source.closed, 1);
    EXPECT_EQ(f.source.collected, 1);
    tensorflow::profiler::XSpace space;
    ASSERT_TRUE(space.ParseFromString(r->xspace));
    const std::string warning = space.warnings(0);
    EXPECT_NE(warning.find(way == 0   ? "terminated"
                           : way == 1 ? "cancelled"
                                      : "shutting down"),
              std::string::npos)
        << warning;
  }
}

TEST(CaptureSessions, ShutdownRefusesNewCaptures) {
  Fixture f;
  f.sessions.shutdown(0);
  EXPECT_EQ(f.sessions.run(request(10, "late"), nullptr).status().code(), absl::StatusCode::kUnavailable);
}

TEST(CaptureSessions, InvalidRequests) {
  Fixture f;
  absl::Status s = f.sessions.run(request(5001, "x"), nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("max_duration_ms=5000"), std::string::npos);
  tensorflow::ProfileRequest far = request(10, "y");
  far.mutable_opts()->set_start_timestamp_ns(static_cast<uint64_t>(f.clock.now_ns() + 3600'000'000'000));
  EXPECT_EQ(f.sessions.run(far, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.sessions.run(request(10, "a/b"), nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.sessions.run(request(10, ".."), nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CaptureSessions, DefaultSessionIdIsTheLocalTimeAsTensorFlowNamesRuns) {
  const testing::ScopedTimeZone zone("<+14>-14");  // UTC+14: its hour is never UTC's
  Fixture f;
  const int64_t before = f.clock.now_ns();
  absl::StatusOr<CapturedSession> r = f.sessions.run(request(10, ""), nullptr);
  const int64_t after = f.clock.now_ns();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->session_id == tf_run_name(before) || r->session_id == tf_run_name(after))
      << r->session_id << " is not the local time of the capture";
}

TEST(CaptureSessions, DurationDefaultsFollowTensorFlow) {
  tensorflow::ProfileRequest r;
  EXPECT_EQ(requested_duration_ms(r), 1000);
  r.set_duration_ms(250);
  EXPECT_EQ(requested_duration_ms(r), 250);
  r.mutable_opts()->set_duration_ms(400);
  EXPECT_EQ(requested_duration_ms(r), 400);
}

TEST(ResolveCaptureFile, StaysInsideTheRoot) {
  const testing::ScratchDirectory scratch("capture_root");
  const std::filesystem::path& root = scratch.path();
  fs::create_directories(root / "sub");
  fs::remove(root / "out");
  fs::create_directory_symlink("/tmp", root / "out");
  EXPECT_EQ(*resolve_capture_file(root.string(), "", "s1", "h"), (root / "s1/h.xplane.pb").string());
  EXPECT_EQ(*resolve_capture_file(root.string(), "sub", "s1", "h"), (root / "sub/s1/h.xplane.pb").string());
  EXPECT_EQ(*resolve_capture_file(root.string(), (root / "sub").string(), "s1", "h"),
            (root / "sub/s1/h.xplane.pb").string());
  for (const std::string bad : {"..", "../x", "sub/../../x", "out", "/etc", "out/x"}) {
    absl::StatusOr<std::string> r = resolve_capture_file(root.string(), bad, "s1", "h");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << bad;
    EXPECT_NE(std::string(r.status().message()).find("outside --repository_root"), std::string::npos) << bad;
  }
  EXPECT_EQ(resolve_capture_file("", "x", "s1", "h").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ResolveCaptureFile, AReusedSessionIdNeverOverwritesAnEarlierCapture) {
  const testing::ScratchDirectory scratch("capture_reuse");
  const std::filesystem::path& root = scratch.path();
  fs::create_directories(root / "s1");
  std::ofstream(root / "s1/h.xplane.pb") << "earlier capture";
  EXPECT_EQ(*resolve_capture_file(root.string(), "", "s1", "other-host"), (root / "s1/other-host.xplane.pb").string())
      << "another host's file joins the session";
  EXPECT_EQ(*resolve_capture_file(root.string(), "", "s1", "h"), (root / "s1_1/h.xplane.pb").string());
  fs::create_directories(root / "s1_1");
  std::ofstream(root / "s1_1/h.xplane.pb") << "second capture";
  EXPECT_EQ(*resolve_capture_file(root.string(), "", "s1", "h"), (root / "s1_2/h.xplane.pb").string());
}

TEST(CaptureFileHost, NamedAsTensorFlowsServerNamesTheFile) {
  tensorflow::ProfileRequest r;
  EXPECT_EQ(capture_file_host(r, "agent-host"), "agent-host");
  r.set_host_name("10.0.0.2:8466");
  EXPECT_EQ(capture_file_host(r, "agent-host"), "10.0.0.2_8466");
  r.mutable_opts()->set_override_hostname("opts-name");
  EXPECT_EQ(capture_file_host(r, "agent-host"), "opts-name");
  (*r.mutable_opts()->mutable_advanced_configuration())["override_hostname"].set_string_value("advanced-name");
  EXPECT_EQ(capture_file_host(r, "agent-host"), "advanced-name");
  (*r.mutable_opts()->mutable_advanced_configuration())["override_hostname"].set_string_value("");
  EXPECT_EQ(capture_file_host(r, "agent-host"), "opts-name") << "an empty override names nothing";
}

TEST(ResolveCaptureFile, AHostNameThatIsNoPlainFileNameIsNotWritten) {
  const testing::ScratchDirectory scratch("capture_host");
  const std::filesystem::path& root = scratch.path();
  for (const std::string bad : {"../x", "a/b", "..", ""}) {
    EXPECT_EQ(resolve_capture_file(root.string(), "", "s1", bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_TRUE(fs::is_empty(root));
}

TEST(WritesCaptureFile, OnlyWhenTheXSpaceIsNotAskedForInTheResponse) {
  tensorflow::ProfileRequest r;
  EXPECT_TRUE(writes_capture_file(r));
  r.set_emit_xspace(false);
  EXPECT_TRUE(writes_capture_file(r));
  r.set_emit_xspace(true);
  EXPECT_FALSE(writes_capture_file(r));
}

TEST(FanoutHost, OnlyHostColonPortIsAHostNoGrpcTargetScheme) {
  const auto parsed = [](std::string_view text) { return parse_fanout_host(text, 8466); };
  EXPECT_EQ(parsed("10.0.0.7:9000")->address, "10.0.0.7:9000");
  EXPECT_EQ(parsed("grpc://worker-3.pod:9000")->host, "worker-3.pod");
  EXPECT_EQ(parsed("worker-3")->address, "worker-3:8466");
  EXPECT_EQ(parsed("[::1]:9000")->host, "::1");
  EXPECT_EQ(parsed("[::1]:9000")->address, "[::1]:9000");
  for (const std::string_view bad : {"unix:/run/podscope/agent.sock",
                                     "unix:agent",
                                     "unix-abstract:x",
                                     "ipv4:127.0.0.1:8466",
                                     "ipv6:[::1]:8466",
                                     "dns:///localhost:8466",
                                     "dns:localhost:8466",
                                     "vsock:3:8466",
                                     "localhost:0",
                                     "localhost:65536",
                                     "localhost:http",
                                     "localhost:8466/x",
                                     "user@localhost:8466",
                                     "../../escape:8466",
                                     "",
                                     ":8466",
                                     "[::1]",
                                     "[not-v6]:8466",
                                     "a..b:8466",
                                     "grpc://",
                                     "host name:8466",
                                     "h\nx:8466"}) {
    const absl::StatusOr<FanoutHost> host = parsed(bad);
    EXPECT_EQ(host.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  // An address followed by a NUL byte and a path, as the fan-out fuzzer sent it: the text after the NUL counts.
  using namespace std::string_view_literals;
  for (const std::string_view bad : {"127.0.0.27\0podscope/a@6:8466"sv, "[::1\0/x]:8466"sv}) {
    EXPECT_EQ(parsed(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(FanoutTargets, AddressPatternsMatchResolvedAddressesAndNamePatternsWholeNames) {
  using Addresses = std::vector<std::string>;
  const auto host = [](std::string_view text) { return *parse_fanout_host(text, 8466); };
  const FanoutTargets own_port({}, 8466);
  EXPECT_EQ(own_port.allowed_addresses(host("10.0.0.7:8466"), {"10.0.0.7"}), Addresses{"10.0.0.7"});
  EXPECT_EQ(own_port.allowed_addresses(host("worker-3.pod:8466"), {"10.0.0.9", "fd00::9"}),
            (Addresses{"10.0.0.9", "fd00::9"}));
  EXPECT_TRUE(own_port.allowed_addresses(host("10.0.0.7:22"), {"10.0.0.7"}).empty());
  EXPECT_EQ(own_port.describe(), "*:8466");

  const FanoutTargets listed({"10.0.*:8466", "worker-*.pod:*"}, 8466);
  EXPECT_EQ(listed.allowed_addresses(host("10.0.3.4:8466"), {"10.0.3.4"}), Addresses{"10.0.3.4"});
  EXPECT_TRUE(listed.allowed_addresses(host("10.1.3.4:8466"), {"10.1.3.4"}).empty());
  // A name that looks like an allowed address is judged by where it leads, not by its text; of what it resolves to,
  // only the allowed addresses are dialled.
  EXPECT_TRUE(listed.allowed_addresses(host("10.0.attacker.example:8466"), {"192.0.2.66"}).empty());
  EXPECT_EQ(listed.allowed_addresses(host("inside.example:8466"), {"192.0.2.66", "10.0.0.5"}), Addresses{"10.0.0.5"});
  // Names match whole: the pattern's '*' stays within one label.
  EXPECT_EQ(listed.allowed_addresses(host("worker-12.pod:9000"), {"192.0.2.1"}), Addresses{"192.0.2.1"});
  EXPECT_EQ(listed.allowed_addresses(host("WORKER-12.POD:9000"), {"192.0.2.1"}), Addresses{"192.0.2.1"});
  EXPECT_TRUE(listed.allowed_addresses(host("worker-12.pod.evil:9000"), {"192.0.2.1"}).empty());
  EXPECT_TRUE(listed.allowed_addresses(host("worker-1.evil.pod:9000"), {"192.0.2.1"}).empty());
  EXPECT_TRUE(listed.allowed_addresses(host("other:8466"), {"192.0.2.1"}).empty());
  // An address written out is no name: a name pattern does not admit it.
  EXPECT_TRUE(FanoutTargets({"worker-*:*"}, 8466).allowed_addresses(host("192.0.2.1:8466"), {"192.0.2.1"}).empty());
  const FanoutTargets v6({"[fd00:*]:*"}, 8466);
  EXPECT_EQ(v6.allowed_addresses(host("[fd00::5]:8466"), {"fd00::5"}), Addresses{"fd00::5"});
  EXPECT_TRUE(v6.allowed_addresses(host("[fe80::5]:8466"), {"fe80::5"}).empty());
}

TEST(FanoutTargets, APatternMustBeHostColonPort) {
  EXPECT_TRUE(check_fanout_patterns({"*:*", "10.0.*:8466"}).ok());
  for (const std::string bad : {"8466", ":8466", "host:", ""}) {
    const absl::Status s = check_fanout_patterns({bad});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(s.message()).find("host:port"), std::string::npos) << s.message();
  }
}

class FixedCollector : public Collector {
 public:
  explicit FixedCollector(CollectorState state) : state_(std::move(state)) {}
  std::string_view name() const override { return "fixed"; }
  CollectorState status() const override { return state_; }
  void sample(int64_t, SampleSink&) override {}

 private:
  CollectorState state_;
};

TEST(HostSeriesSource, GaugesAsIsCountersAsRatesHostStatsAndWarnings) {
  prometheus::Registry registry;
  SeriesStore store(registry, "h", 64);
  SeriesId gauge = store.declare({.metric = "podscope_g", .help = "g", .plane = "/host:CPU", .track = "Gauge"});
  SeriesId counter = store.declare({.metric = "podscope_c_total",
                                    .help = "c",
                                    .kind = SeriesSpec::Kind::kCounter,
                                    .plane = "/host:CPU",
                                    .track = "Rate (/s)"});
  SeriesId hidden = store.declare({.metric = "podscope_hidden", .help = "h"});
  const int64_t t0 = 1'700'000'000'000'000'000;
  for (int i = 0; i < 5; ++i) {
    store.record(gauge, t0 + i * 1'000'000'000LL, i * 10);
    store.record(counter, t0 + i * 1'000'000'000LL, i * 500.0);
    store.record(hidden, t0 + i * 1'000'000'000LL, 1);
  }
  FixedCollector degraded({CollectorState::State::kDegraded, "/proc/stat: line 2: bad"});
  HostSeriesSource source(store, {"h", 8, 1 << 30}, {&degraded});
  CaptureWindow window;
  window.start_ns = t0 + 1'000'000'000LL;  // samples 1..3 fall inside
  source.open(window);
  source.close(t0 + 3'000'000'000LL);
  CaptureSpace out("host-x");
  source.collect(out);
  tensorflow::profiler::XSpace& space = out.space();

  const auto* plane = xspace::find_plane(space, xspace::kHostPlaneName);
  ASSERT_NE(plane, nullptr);
  xspace::XPlaneReader reader(*plane);
  EXPECT_EQ(reader.int_stat(xspace::kCoreCountStat), 8);
  EXPECT_EQ(reader.int_stat(xspace::kMemorySizeStat), 1 << 30);
  const auto* line = reader.find_line(xspace::kCountersLineName);
  ASSERT_NE(line, nullptr);
  std::vector<std::pair<std::string, double>> points;
  reader.for_each_event(*line, [&](const xspace::XEventView& e) {
    points.emplace_back(std::string(e.name()), e.double_stat(xspace::kCounterValueStat).value_or(-1));
  });
  std::vector<std::pair<std::string, double>> expected = {
      {"Gauge", 10}, {"Gauge", 20}, {"Gauge", 30}, {"Rate (/s)", 500}, {"Rate (/s)", 500}};
  std::sort(points.begin(), points.end());
  EXPECT_EQ(points, expected);
  ASSERT_EQ(space.warnings_size(), 1);
  EXPECT_EQ(space.warnings(0), "collector fixed degraded: /proc/stat: line 2: bad");
}

TEST(MonitorText, CaptureTpuProfileStyleLines) {
  tensorflow::ProfilerServiceMonitorResult r;
  r.set_matrix_unit_utilization_percent(10.66);
  r.set_device_idle_time_percent(89.34);
  r.set_step_time_ms_avg(70.6);
  r.set_step_time_ms_min(70.1);
  r.set_step_time_ms_max(71.0);
  const std::string text = monitor_text(r, 2, host_cpu_device(4), true, 0);
  EXPECT_NE(text.find("Utilization of CPU (higher is better): 10.7%"), std::string::npos) << text;
  EXPECT_NE(text.find("CPU idle time (lower is better): 89.3%"), std::string::npos) << text;
  EXPECT_NE(text.find("Step time: 70.6ms (avg), 70.1ms (min), 71.0ms (max)"), std::string::npos) << text;
  EXPECT_EQ(monitor_text(r, 1, host_cpu_device(4), false, 0).find("Step time"), std::string::npos);
  EXPECT_EQ(monitor_text(r, 1, host_cpu_device(4), false, 1'700'000'000'000'000'000).rfind("Timestamp: ", 0), 0u);

  DeviceUtilization tpu;
  tpu.device_type = "TPU v4";
  tpu.short_name = "TPU";
  tpu.count_label = "TPU cores";
  tpu.core_count = 8;
  tpu.utilization_kind = "TensorCore duty cycle";
  const std::string tpu_text = monitor_text(r, 2, tpu, false, 0);
  EXPECT_NE(tpu_text.find("Device type: TPU v4\n"), std::string::npos) << tpu_text;
  EXPECT_NE(tpu_text.find("Utilization of TPU (higher is better): 10.7% (TensorCore duty cycle)"), std::string::npos)
      << tpu_text;
  EXPECT_NE(tpu_text.find("TPU idle time (lower is better): 89.3%"), std::string::npos) << tpu_text;
  EXPECT_NE(tpu_text.find("Number of TPU cores: 8"), std::string::npos) << tpu_text;
}

}  // namespace
}  // namespace podscope::agent
