#include "agent/service/profiler_service.h"

#include <cstdio>
#include <ctime>

#include "daemon/grpc_status.h"
#include "daemon/log.h"

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
  out += "Utilization of " + device.short_name + " (higher is better): " +
         percent(r.matrix_unit_utilization_percent()) + kind + "\n";
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

ProfilerServiceImpl::ProfilerServiceImpl(CaptureSessions& captures, const CpuCollector& cpu,
                                         std::vector<const DeviceUtilizationSource*> devices,
                                         std::function<int64_t()> sample_now, const StepTracker& steps,
                                         const Clock& clock, RequestMetrics& metrics)
    : captures_(captures),
      cpu_(cpu),
      devices_(std::move(devices)),
      sample_now_(std::move(sample_now)),
      steps_(steps),
      clock_(clock),
      metrics_(metrics) {}

grpc::Status ProfilerServiceImpl::Profile(grpc::ServerContext* context, const tensorflow::ProfileRequest* request,
                                          tensorflow::ProfileResponse* response) {
  absl::StatusOr<CaptureResult> result = captures_.run(*request, [context] { return context->IsCancelled(); });
  if (!result.ok()) {
    PODSCOPE_LOG(kWarning) << "Profile refused: " << result.status().message();
    metrics_.captures_refused.Increment();
    return to_grpc_status(result.status());
  }
  metrics_.captures_served.Increment();
  response->set_empty_trace(result->empty_trace);
  // One copy of the data either way: the XSpace moves into the response, or is serialized into tool_data.
  if (request->has_emit_xspace() && request->emit_xspace()) {
    response->mutable_xspace()->Swap(&result->space);
  } else {
    tensorflow::ProfileToolData* tool = response->add_tool_data();
    tool->set_name("xplane.pb");
    result->space.SerializeToString(tool->mutable_data());
  }
  return grpc::Status::OK;
}

grpc::Status ProfilerServiceImpl::Terminate(grpc::ServerContext*, const tensorflow::TerminateRequest* request,
                                            tensorflow::TerminateResponse*) {
  return to_grpc_status(captures_.terminate(request->session_id()));
}

grpc::Status ProfilerServiceImpl::Monitor(grpc::ServerContext* context, const tensorflow::MonitorRequest* request,
                                          tensorflow::MonitorResponse* response) {
  const int level = request->monitoring_level();
  if (level < 0 || level > 2) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "monitoring_level " + std::to_string(level) + " is not one of 0, 1, 2");
  }
  const int64_t limit_ms = captures_.limits().max_duration_ms;
  const int64_t duration_ms = request->duration_ms() == 0 ? 1000 : static_cast<int64_t>(request->duration_ms());
  if (request->duration_ms() > static_cast<uint64_t>(limit_ms)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "duration_ms " + std::to_string(request->duration_ms()) +
                            " exceeds the agent's limit max_duration_ms=" + std::to_string(limit_ms));
  }
  const int64_t since_ns = sample_now_();
  const CpuCollector::Totals before = cpu_.totals();
  if (!captures_.wait_for(duration_ms, [context] { return context->IsCancelled(); })) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "monitor interrupted (client cancelled or agent shutting down)");
  }
  const int64_t until_ns = sample_now_();
  const CpuCollector::Totals after = cpu_.totals();

  tensorflow::ProfilerServiceMonitorResult& r = *response->mutable_monitor_result();
  // The accelerator's latest figure (its collector samples every second) when one answers, else the
  // host CPU's share over the window.
  std::optional<DeviceUtilization> device;
  for (const DeviceUtilizationSource* source : devices_) {
    if ((device = source->device_utilization())) break;
  }
  const double busy = static_cast<double>(after.busy - before.busy);
  const double total = static_cast<double>(after.total - before.total);
  const double utilization = device ? device->utilization_percent : total > 0 ? 100.0 * busy / total : 0.0;
  bool steps_observed = false;
  if (level >= 1) {
    r.set_response_type(tensorflow::ProfilerServiceMonitorResult::UTIL_ONLY);
    r.set_matrix_unit_utilization_percent(utilization);
  }
  if (level >= 2) {
    r.set_response_type(tensorflow::ProfilerServiceMonitorResult::UTIL_IDLE);
    r.set_device_idle_time_percent(100.0 - utilization);
    if (std::optional<StepSummary> s = steps_.summarize(since_ns, until_ns)) {
      steps_observed = true;
      r.set_response_type(tensorflow::ProfilerServiceMonitorResult::UTIL_IDLE_STEP);
      r.set_step_time_ms_avg(s->step_time_ms_avg);
      r.set_step_time_ms_min(s->step_time_ms_min);
      r.set_step_time_ms_max(s->step_time_ms_max);
      r.set_infeed_percent_avg(s->infeed_percent_avg);
      r.set_infeed_percent_min(s->infeed_percent_min);
      r.set_infeed_percent_max(s->infeed_percent_max);
    }
  }
  metrics_.monitors_served.Increment();
  response->set_data(monitor_text(r, level, device ? *device : host_cpu_device(after.cores), steps_observed,
                                  request->timestamp() ? clock_.now_ns() : 0));
  return grpc::Status::OK;
}

}  // namespace podscope::agent
