#include "agent/capture/monitor_report.h"

#include <cstdio>
#include <ctime>

namespace podscope::agent {
namespace {

std::string percent(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f%%", v);
  return text;
}

std::string ms(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1fms", v);
  return text;
}

}  // namespace

DeviceUtilization host_cpu_device(int cores) {
  DeviceUtilization cpu;
  cpu.device_type = "CPU (host, no accelerator)";
  cpu.short_name = "CPU";
  cpu.count_label = "CPU cores";
  cpu.device_count = 1;
  cpu.core_count = cores;
  return cpu;
}

std::string monitor_text(const tensorflow::ProfilerServiceMonitorResult& r, int level, const DeviceUtilization& device,
                         bool steps_observed, int64_t timestamp_ns) {
  std::string out;
  if (timestamp_ns != 0) {
    const time_t seconds = static_cast<time_t>(timestamp_ns / 1'000'000'000);
    tm local{};
    localtime_r(&seconds, &local);
    char text[16];
    strftime(text, sizeof(text), "%H:%M:%S", &local);
    out += "Timestamp: " + std::string(text) + "\n";
  }
  if (level == 0) return out;
  out += "Device type: " + device.device_type + "\n";
  // Say what the figure is where it is not a plain utilization (a TPU's is its TensorCore duty cycle).
  const std::string kind = device.utilization_kind.empty() ? "" : " (" + device.utilization_kind + ")";
  out += "Utilization of " + device.short_name +
         " (higher is better): " + percent(r.matrix_unit_utilization_percent()) + kind + "\n";
  if (level < 2) return out;
  out += device.short_name + " idle time (lower is better): " + percent(r.device_idle_time_percent()) + "\n";
  out += "Number of " + device.count_label + ": " + std::to_string(device.core_count) + "\n";
  if (!steps_observed) {
    out += "Step time: no steps observed (no annotated training process reported steps)\n";
    return out;
  }
  out += "Step time: " + ms(r.step_time_ms_avg()) + " (avg), " + ms(r.step_time_ms_min()) + " (min), " +
         ms(r.step_time_ms_max()) + " (max)\n";
  out += "Infeed percentage: " + percent(r.infeed_percent_avg()) + " (avg), " + percent(r.infeed_percent_min()) +
         " (min), " + percent(r.infeed_percent_max()) + " (max)\n";
  return out;
}

// The watched window: its edges (sampling passes) and the host CPU's totals at each.
struct MonitorReporter::Window {
  int64_t since_ns = 0;
  int64_t until_ns = 0;
  CpuCollector::Totals before;
  CpuCollector::Totals after;
};

MonitorReporter::MonitorReporter(CaptureSessions& captures, const CpuCollector& cpu,
                                 std::vector<const DeviceUtilizationSource*> devices,
                                 std::function<int64_t()> sample_now, const StepTracker& steps, const Clock& clock)
    : captures_(captures),
      cpu_(cpu),
      devices_(std::move(devices)),
      sample_now_(std::move(sample_now)),
      steps_(steps),
      clock_(clock) {}

absl::StatusOr<tensorflow::MonitorResponse> MonitorReporter::report(const tensorflow::MonitorRequest& request,
                                                                    const std::function<bool()>& cancelled) {
  const int level = request.monitoring_level();
  if (level < 0 || level > 2) {
    return absl::InvalidArgumentError("monitoring_level " + std::to_string(level) + " is not one of 0, 1, 2");
  }
  const int64_t duration_ms = duration_or_default_ms(request.duration_ms());
  if (absl::Status s = check_duration_limit(duration_ms, captures_.limits()); !s.ok()) return s;
  absl::StatusOr<Window> window = watch(duration_ms, cancelled);
  if (!window.ok()) return window.status();

  const std::optional<DeviceUtilization> device = accelerator();
  tensorflow::MonitorResponse response;
  const tensorflow::ProfilerServiceMonitorResult& result = *response.mutable_monitor_result() =
      result_of(*window, level, device);
  const bool steps_observed = result.response_type() == tensorflow::ProfilerServiceMonitorResult::UTIL_IDLE_STEP;
  response.set_data(monitor_text(result, level, device ? *device : host_cpu_device(window->after.cores), steps_observed,
                                 request.timestamp() ? clock_.now_ns() : 0));
  return response;
}

absl::StatusOr<MonitorReporter::Window> MonitorReporter::watch(int64_t duration_ms,
                                                               const std::function<bool()>& cancelled) {
  Window window;
  window.since_ns = sample_now_();
  window.before = cpu_.totals();
  if (!captures_.wait_for(duration_ms, cancelled)) {
    return absl::CancelledError("monitor interrupted (client cancelled or agent shutting down)");
  }
  window.until_ns = sample_now_();
  window.after = cpu_.totals();
  return window;
}

// The accelerator's latest figure (its collector samples every second) when one answers.
std::optional<DeviceUtilization> MonitorReporter::accelerator() const {
  for (const DeviceUtilizationSource* source : devices_) {
    if (std::optional<DeviceUtilization> device = source->device_utilization()) return device;
  }
  return std::nullopt;
}

tensorflow::ProfilerServiceMonitorResult MonitorReporter::result_of(
    const Window& window, int level, const std::optional<DeviceUtilization>& device) const {
  tensorflow::ProfilerServiceMonitorResult r;
  const double busy = static_cast<double>(window.after.busy - window.before.busy);
  const double total = static_cast<double>(window.after.total - window.before.total);
  const double utilization = device ? device->utilization_percent : total > 0 ? 100.0 * busy / total : 0.0;
  if (level >= 1) {
    r.set_response_type(tensorflow::ProfilerServiceMonitorResult::UTIL_ONLY);
    r.set_matrix_unit_utilization_percent(utilization);
  }
  if (level >= 2) {
    r.set_response_type(tensorflow::ProfilerServiceMonitorResult::UTIL_IDLE);
    r.set_device_idle_time_percent(100.0 - utilization);
    if (std::optional<StepSummary> s = steps_.summarize(window.since_ns, window.until_ns)) {
      r.set_response_type(tensorflow::ProfilerServiceMonitorResult::UTIL_IDLE_STEP);
      r.set_step_time_ms_avg(s->step_time_ms_avg);
      r.set_step_time_ms_min(s->step_time_ms_min);
      r.set_step_time_ms_max(s->step_time_ms_max);
      r.set_infeed_percent_avg(s->infeed_percent_avg);
      r.set_infeed_percent_min(s->infeed_percent_min);
      r.set_infeed_percent_max(s->infeed_percent_max);
    }
  }
  return r;
}

}  // namespace podscope::agent
