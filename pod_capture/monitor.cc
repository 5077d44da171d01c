#include "pod_capture/monitor.h"

#include <chrono>
#include <cstdio>

#include "absl/strings/str_split.h"

namespace podscope::pod_capture {

std::vector<std::string> worker_names(const std::vector<AgentConnection*>& agents) {
  std::vector<std::string> names;
  for (auto* agent : agents) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    podscope::v1::AgentStatus status;
    const bool named =
        agent->agent->GetStatus(&context, podscope::v1::StatusRequest(), &status).ok() && !status.host_name().empty();
    names.push_back(named ? status.host_name() : agent->address);
  }
  return names;
}

std::vector<WorkerMonitorResult> monitor_round(const std::vector<AgentConnection*>& agents,
                                               const std::vector<std::string>& names, int64_t duration_ms,
                                               int monitoring_level, bool display_timestamp) {
  struct Call {
    grpc::ClientContext context;
    tensorflow::MonitorResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<tensorflow::MonitorResponse>> reader;
  };
  tensorflow::MonitorRequest request;
  request.set_duration_ms(static_cast<uint64_t>(duration_ms));
  request.set_monitoring_level(monitoring_level);
  request.set_timestamp(display_timestamp);
  grpc::CompletionQueue queue;
  std::vector<Call> calls(agents.size());
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(duration_ms + 30'000);
  for (size_t i = 0; i < agents.size(); ++i) {
    calls[i].context.set_deadline(deadline);
    calls[i].reader = agents[i]->profiler->AsyncMonitor(&calls[i].context, request, &queue);
    calls[i].reader->Finish(&calls[i].response, &calls[i].status, reinterpret_cast<void*>(i));
  }
  for (size_t done = 0; done < agents.size(); ++done) {
    void* tag;
    bool ok;
    if (!queue.Next(&tag, &ok)) break;
  }
  std::vector<WorkerMonitorResult> out(agents.size());
  for (size_t i = 0; i < agents.size(); ++i) {
    out[i].address = agents[i]->address;
    out[i].name = i < names.size() ? names[i] : agents[i]->address;
    if (!calls[i].status.ok()) {
      out[i].error = calls[i].status.error_message();
    } else {
      out[i].response = std::move(calls[i].response);
    }
  }
  return out;
}

std::optional<PodStepTimes> aggregate_step_times(const std::vector<WorkerMonitorResult>& results) {
  PodStepTimes pod;
  double sum = 0;
  double slowest = -1;
  for (const auto& r : results) {
    if (!r.error.empty()) continue;
    const auto& m = r.response.monitor_result();
    if (m.response_type() != tensorflow::ProfilerServiceMonitorResult::UTIL_IDLE_STEP) continue;
    if (pod.workers == 0 || m.step_time_ms_min() < pod.min_ms) pod.min_ms = m.step_time_ms_min();
    if (pod.workers == 0 || m.step_time_ms_max() > pod.max_ms) pod.max_ms = m.step_time_ms_max();
    sum += m.step_time_ms_avg();
    if (m.step_time_ms_avg() > slowest) {
      slowest = m.step_time_ms_avg();
      pod.slowest_worker = r.name;
    }
    ++pod.workers;
  }
  if (pod.workers == 0) return std::nullopt;
  pod.avg_ms = sum / pod.workers;
  return pod;
}

std::string format_monitor_round(int sample, const std::vector<WorkerMonitorResult>& results) {
  std::string out = "Pod Monitoring Results (Sample " + std::to_string(sample) + "):\n\n";
  for (const auto& r : results) {
    out += "Worker " + (r.name == r.address ? r.address : r.name + " (" + r.address + ")") + ":\n";
    if (!r.error.empty()) {
      out += "  Monitor failed: " + r.error + "\n";
      continue;
    }
    for (absl::string_view line : absl::StrSplit(r.response.data(), '\n', absl::SkipEmpty())) {
      out += "  " + std::string(line) + "\n";
    }
  }
  if (auto pod = aggregate_step_times(results)) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "Pod (%d worker(s)): step time avg %.2f ms, min %.2f ms, max %.2f ms; slowest worker %s\n",
                  pod->workers, pod->avg_ms, pod->min_ms, pod->max_ms, pod->slowest_worker.c_str());
    out += buf;
  } else {
    out += "Pod: no worker reported step times\n";
  }
  return out;
}

}  // namespace podscope::pod_capture
