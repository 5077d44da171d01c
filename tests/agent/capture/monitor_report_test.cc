// Monitor without sockets: the duration limit is the capture's (same code, same words), the device is the first
// source with a figure, level 2 reports the steps that ended in the window, and shutdown interrupts it.
#include "agent/capture/monitor_report.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <thread>

namespace podscope::agent {
namespace {

class FixedDevice : public DeviceUtilizationSource {
 public:
  explicit FixedDevice(std::optional<DeviceUtilization> figure) : figure_(std::move(figure)) {}
  std::optional<DeviceUtilization> device_utilization() const override { return figure_; }

 private:
  std::optional<DeviceUtilization> figure_;
};

DeviceUtilization tpu(double percent) {
  DeviceUtilization d;
  d.device_type = "TPU v4";
  d.short_name = "TPU";
  d.count_label = "TPU cores";
  d.core_count = 4;
  d.utilization_percent = percent;
  d.utilization_kind = "TensorCore duty cycle";
  return d;
}

struct Fixture {
  explicit Fixture(std::vector<const DeviceUtilizationSource*> devices = {}) : devices(std::move(devices)) {
    CaptureLimits limits;
    limits.max_duration_ms = 500;
    sessions.set_limits(limits);
  }
  MonitorReporter reporter() {
    return MonitorReporter(
        sessions, cpu, devices, [this] { return clock.now_ns(); }, steps, clock);
  }
  Clock clock;
  RepositoryQuota quota{size_t{1} << 30};
  CaptureSessions sessions{clock, "host-m", [this] { return clock.now_ns(); }, quota};
  CpuCollector cpu;  // this host's /proc/stat
  StepTracker steps;
  std::vector<const DeviceUtilizationSource*> devices;
};

tensorflow::MonitorRequest monitor_request(uint64_t ms, int level) {
  tensorflow::MonitorRequest r;
  r.set_duration_ms(ms);
  r.set_monitoring_level(level);
  return r;
}

TEST(MonitorReporter, OverTheLimitIsRefusedWithTheCodeAndWordsOfAProfile) {
  Fixture f;
  MonitorReporter monitor = f.reporter();
  // Above the limit, the default duration (0 → 1000 ms) above a 500 ms limit, and a duration too large to hold.
  for (uint64_t ms : {uint64_t{501}, uint64_t{0}, UINT64_MAX}) {
    tensorflow::ProfileRequest profile;
    profile.set_duration_ms(ms);
    const absl::Status profile_status = f.sessions.run(profile, nullptr).status();
    const absl::Status monitor_status = monitor.report(monitor_request(ms, 1), nullptr).status();
    EXPECT_EQ(monitor_status.code(), absl::StatusCode::kInvalidArgument) << ms;
    EXPECT_EQ(monitor_status, profile_status) << ms;
    EXPECT_NE(std::string(monitor_status.message()).find("max_duration_ms=500"), std::string::npos) << monitor_status;
  }
  EXPECT_EQ(monitor.report(monitor_request(10, 3), nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MonitorReporter, FirstDeviceWithAFigureAndTheStepsThatEndedInTheWindow) {
  const FixedDevice silent(std::nullopt);
  const FixedDevice busy(tpu(62.5));
  Fixture f({&silent, &busy});
  MonitorReporter monitor = f.reporter();
  std::thread trainer([&f] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int64_t now = f.clock.now_ns();
    f.steps.record({0, 1, now - 20'000'000, now - 10'000'000, 2'000'000, 0});
    f.steps.record({0, 2, now - 10'000'000, now, 0, 0});
  });
  absl::StatusOr<tensorflow::MonitorResponse> r = monitor.report(monitor_request(200, 2), nullptr);
  trainer.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->monitor_result().response_type(), tensorflow::ProfilerServiceMonitorResult::UTIL_IDLE_STEP);
  EXPECT_DOUBLE_EQ(r->monitor_result().matrix_unit_utilization_percent(), 62.5);
  EXPECT_DOUBLE_EQ(r->monitor_result().device_idle_time_percent(), 37.5);
  EXPECT_DOUBLE_EQ(r->monitor_result().step_time_ms_avg(), 10.0);
  EXPECT_NE(r->data().find("Utilization of TPU (higher is better): 62.5% (TensorCore duty cycle)"), std::string::npos)
      << r->data();
  EXPECT_NE(r->data().find("Step time: 10.0ms (avg)"), std::string::npos) << r->data();
}

TEST(MonitorReporter, WithoutAnAcceleratorTheHostCpuAndShutdownInterrupts) {
  Fixture f;
  MonitorReporter monitor = f.reporter();
  absl::StatusOr<tensorflow::MonitorResponse> r = monitor.report(monitor_request(50, 2), nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->monitor_result().response_type(), tensorflow::ProfilerServiceMonitorResult::UTIL_IDLE);
  EXPECT_NE(r->data().find("Device type: CPU (host, no accelerator)"), std::string::npos) << r->data();
  EXPECT_NE(r->data().find("no steps observed"), std::string::npos) << r->data();

  auto running = std::async(std::launch::async, [&] { return monitor.report(monitor_request(400, 1), nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  f.sessions.shutdown(0);
  EXPECT_EQ(running.get().status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace podscope::agent
