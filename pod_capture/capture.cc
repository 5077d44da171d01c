#include "pod_capture/capture.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::pod_capture {
namespace {

using tensorflow::ProfileRequest;
using tensorflow::ProfileResponse;

bool is_retryable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::ALREADY_EXISTS ||
         status.error_message().find("Stream removed") != std::string::npos;
}

bool has_events(const tensorflow::profiler::XSpace& space) {
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      if (line.events_size() > 0) return true;
    }
  }
  return false;
}

// The earliest capture_start_ns any plane of the space records (the agent's clock).
std::optional<int64_t> recorded_start(const tensorflow::profiler::XSpace& space) {
  std::optional<int64_t> out;
  for (const auto& plane : space.planes()) {
    const xspace::XPlaneReader reader(plane);
    if (auto start = reader.int_stat(xspace::kCaptureStartStat)) {
      if (!out || *start < *out) out = *start;
    }
  }
  return out;
}

struct ProfileCall {
  size_t index = 0;
  grpc::ClientContext context;
  ProfileResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<ProfileResponse>> reader;
};

struct AttemptOutcome {
  std::vector<grpc::Status> statuses;
  std::vector<ProfileResponse> responses;
};

// Sends Profile to every agent through one completion queue and waits for all answers. At most
// `max_in_flight` calls are outstanding; the rest are issued as earlier ones complete.
AttemptOutcome fan_out(const std::vector<AgentConnection*>& agents, const std::vector<ProfileRequest>& requests,
                       std::chrono::system_clock::time_point deadline, int max_in_flight) {
  AttemptOutcome out;
  out.statuses.resize(agents.size());
  out.responses.resize(agents.size());
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<ProfileCall>> calls(agents.size());
  size_t issued = 0;
  auto issue = [&](size_t i) {
    auto call = std::make_unique<ProfileCall>();
    call->index = i;
    call->context.set_deadline(deadline);
    call->reader = agents[i]->profiler->AsyncProfile(&call->context, requests[i], &queue);
    call->reader->Finish(&call->response, &call->status, call.get());
    calls[i] = std::move(call);
  };
  const size_t first_wave = std::min(agents.size(), static_cast<size_t>(std::max(1, max_in_flight)));
  for (; issued < first_wave; ++issued) issue(issued);
  for (size_t done = 0; done < agents.size(); ++done) {
    void* tag = nullptr;
    bool ok = false;
    if (!queue.Next(&tag, &ok)) break;
    auto* call = static_cast<ProfileCall*>(tag);
    out.statuses[call->index] = call->status;
    out.responses[call->index] = std::move(call->response);
    calls[call->index].reset();
    if (issued < agents.size()) issue(issued++);
  }
  queue.Shutdown();
  void* tag;
  bool ok;
  while (queue.Next(&tag, &ok)) {
  }
  return out;
}

}  // namespace

int CaptureResult::exit_code() const {
  const auto with_data = std::count_if(hosts.begin(), hosts.end(), [](const HostCapture& h) { return h.ok; });
  if (with_data == 0) return 1;
  return with_data == static_cast<long>(hosts.size()) ? 0 : 3;
}

std::string make_session_id(int64_t unix_ns) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm local{};
  localtime_r(&seconds, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y_%m_%d_%H_%M_%S", &local);
  return buf;
}

int64_t fanout_margin_ms(size_t host_count) {
  // Issuing a call costs tens of µs on the client; 100 ms covers the network and a loaded scheduler.
  return 100 + static_cast<int64_t>(host_count) / 8;
}

CaptureResult run_capture(const std::vector<AgentConnection*>& agents, const CaptureSpec& spec, const Clock& clock,
                          const ProgressFn& progress) {
  CaptureResult result;
  result.session_id = spec.session_id.empty() ? make_session_id(clock.now_ns()) : spec.session_id;
  const int64_t duration_ms = spec.duration_ms > 0 ? spec.duration_ms : 1000;
  result.duration_ms = duration_ms;
  const int attempts = std::max(1, spec.num_tracing_attempts);

  std::vector<HostCapture> best;
  long best_count = -1;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    progress("Starting to trace for " + std::to_string(duration_ms) +
             " ms. Remaining attempt(s): " + std::to_string(attempts - attempt));
    std::vector<HostCapture> hosts(agents.size());
    const int64_t sync_begin_ns = clock.now_ns();
    const auto before = measure_clocks(agents, clock, spec.clock_sync_pings, 1000);

    const int64_t delay_ms = std::max<int64_t>(spec.delay_ms, fanout_margin_ms(agents.size()));
    const int64_t start_ns = clock.now_ns() + delay_ms * 1'000'000;
    std::vector<ProfileRequest> requests(agents.size());
    for (size_t i = 0; i < agents.size(); ++i) {
      hosts[i].address = agents[i]->address;
      hosts[i].file_stem = agents[i]->file_stem;
      hosts[i].host_name = agents[i]->file_stem;
      hosts[i].clock_before = before[i];
      hosts[i].attempts = attempt;
      hosts[i].requested_start_ns = start_ns + before[i].estimate.offset_ns;
      ProfileRequest& request = requests[i];
      request.set_duration_ms(static_cast<uint64_t>(duration_ms));
      request.set_max_events(1'000'000);
      request.add_tools("xplane.pb");
      request.set_emit_xspace(true);
      request.set_session_id(result.session_id);
      request.set_host_name(agents[i]->file_stem);
      auto* opts = request.mutable_opts();
      opts->set_version(1);
      opts->set_include_dataset_ops(spec.include_dataset_ops);
      opts->set_host_tracer_level(spec.host_tracer_level);
      opts->set_device_tracer_level(spec.device_tracer_level);
      opts->set_python_tracer_level(spec.python_tracer_level);
      opts->set_duration_ms(static_cast<uint64_t>(duration_ms));
      opts->set_start_timestamp_ns(static_cast<uint64_t>(hosts[i].requested_start_ns));
      opts->set_session_id(result.session_id);
    }
    // Per host: max(60 s, 2 × duration) after the start, plus the delay to the start.
    const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(delay_ms) +
                          std::chrono::milliseconds(std::max<int64_t>(60'000, 2 * duration_ms));
    result.attempts = attempt;
    AttemptOutcome outcome = fan_out(agents, requests, deadline, spec.max_in_flight);
    const int64_t gathered_ns = clock.now_ns();
    // As many pings as the opening burst: the merge offset is estimated from both (combine_clocks).
    const auto after = measure_clocks(agents, clock, spec.clock_sync_pings, 1000);

    bool retry_worthy = false;
    long with_data = 0;
    for (size_t i = 0; i < agents.size(); ++i) {
      HostCapture& host = hosts[i];
      host.clock_after = after[i];
      host.clock = combine_clocks(host.clock_before, host.clock_after);
      const grpc::Status& status = outcome.statuses[i];
      if (!status.ok()) {
        host.error = "Profile failed (" + std::to_string(status.error_code()) + "): " + status.error_message();
        retry_worthy |= is_retryable(status);
        continue;
      }
      ProfileResponse& response = outcome.responses[i];
      if (response.has_xspace()) host.space = std::move(*response.mutable_xspace());
      if (host.space.hostnames_size() > 0 && !host.space.hostnames(0).empty()) host.host_name = host.space.hostnames(0);
      if (response.empty_trace() || !has_events(host.space)) {
        host.error = "no trace event was collected";
        continue;
      }
      host.ok = true;
      ++with_data;
      if (auto start = recorded_start(host.space)) host.actual_start_merged_ns = *start - host.clock.estimate.offset_ns;
    }
    if (with_data > best_count) {
      best_count = with_data;
      best = std::move(hosts);
      result.start_ns = start_ns;
      result.kept_attempt = attempt;
      result.sync_begin_ns = sync_begin_ns;
      result.gathered_ns = gathered_ns;
    }
    if (with_data == static_cast<long>(agents.size())) break;
    // As TF's client: only transient errors, or nothing at all, are worth another attempt.
    if (!retry_worthy && with_data > 0) break;
    if (spec.stop_retrying && spec.stop_retrying()) break;
    if (attempt == attempts) {
      if (best_count == 0) {
        progress("No trace event is collected after " + std::to_string(attempts) +
                 " attempt(s). Perhaps, you want to try again (with more attempts?).\n"
                 "Tip: increase number of attempts with --num_tracing_attempts.");
      } else {
        progress(std::to_string(agents.size() - best_count) + " host(s) returned no data after " +
                 std::to_string(attempts) + " attempt(s); keeping the attempt with the most hosts.\n"
                 "Tip: increase number of attempts with --num_tracing_attempts.");
      }
    } else if (with_data == 0 && !retry_worthy) {
      progress("No trace event is collected. Automatically retrying.");
    } else {
      progress(std::to_string(agents.size() - with_data) + " of " + std::to_string(agents.size()) +
               " host(s) failed; retrying on every host with a new start time.");
    }
  }
  result.hosts = std::move(best);
  for (const auto& host : result.hosts) {
    if (host.clock_before.kind == ClockMeasurement::kNoPingRpc) result.warnings.push_back(host.clock_before.detail);
  }
  std::optional<int64_t> first, last;
  for (const auto& host : result.hosts) {
    if (!host.actual_start_merged_ns) continue;
    if (!first || *host.actual_start_merged_ns < *first) first = host.actual_start_merged_ns;
    if (!last || *host.actual_start_merged_ns > *last) last = host.actual_start_merged_ns;
  }
  if (first) result.start_skew_ns = *last - *first;
  return result;
}

}  // namespace podscope::pod_capture
