#include "coordinator/registration_check.h"

#include "pod_capture/agent_connection.h"

namespace podscope::coordinator {

absl::Status RegistrationCheck::check(const podscope::v1::RegisterRequest& request, const std::string& source,
                                      int64_t now_ns) {
  if (absl::Status admitted = admit(source, now_ns); !admitted.ok()) return admitted;
  const absl::Status answered = call_back(request);
  done(source, !answered.ok(), now_ns);
  return answered;
}

absl::Status RegistrationCheck::admit(const std::string& source, int64_t now_ns) {
  const int64_t window_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(kFailureWindow).count();
  std::lock_guard lock(mu_);
  for (auto it = sources_.begin(); it != sources_.end();) {
    auto& failures = it->second.failures_ns;
    while (!failures.empty() && now_ns - failures.front() > window_ns) failures.pop_front();
    it = it->second.checking == 0 && failures.empty() ? sources_.erase(it) : std::next(it);
  }
  Source& from = sources_[source];
  if (static_cast<int>(from.failures_ns.size()) >= kMaxFailuresPerSource) {
    return absl::ResourceExhaustedError(
        "Register: " + std::to_string(from.failures_ns.size()) + " registrations from " + source + " failed their " +
        "check within " + std::to_string(kFailureWindow.count()) + " s; its registrations are refused, nothing " +
        "called back, until " + std::to_string((window_ns - (now_ns - from.failures_ns.front())) / 1'000'000'000 + 1) +
        " s from now");
  }
  if (from.checking >= kMaxCheckingPerSource) {
    return absl::ResourceExhaustedError("Register: " + std::to_string(from.checking) + " registrations from " + source +
                                        " are being checked already (at most " + std::to_string(kMaxCheckingPerSource) +
                                        " at once)");
  }
  ++from.checking;
  return absl::OkStatus();
}

void RegistrationCheck::done(const std::string& source, bool failed, int64_t now_ns) {
  std::lock_guard lock(mu_);
  Source& from = sources_[source];
  --from.checking;
  if (failed) from.failures_ns.push_back(now_ns);
}

absl::Status RegistrationCheck::call_back(const podscope::v1::RegisterRequest& request) const {
  const std::unique_ptr<pod_capture::AgentConnection> agent =
      pod_capture::connect_agent(request.address(), credentials_);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kCallBackTimeout);
  podscope::v1::PingRequest ping;
  ping.set_instance_id(request.instance_id());
  podscope::v1::PingResponse answer;
  const grpc::Status status = agent->agent->Ping(&context, ping, &answer);
  const std::string claim = "registration of " + request.host_name() + " at " + request.address() + ": ";
  if (!status.ok()) {
    return absl::UnavailableError(claim + "the coordinator called that address back and no agent answered (" +
                                  status.error_message() + ")");
  }
  if (answer.host_name() != request.host_name()) {
    return absl::PermissionDeniedError(claim + "the agent at that address is " +
                                       (answer.host_name().empty() ? "nameless" : answer.host_name()) +
                                       "; an agent registers only its own name and address");
  }
  if (!answer.instance_matches()) {
    return absl::PermissionDeniedError(claim +
                                       "the agent at that address is not the instance that registers; an "
                                       "agent registers only its own name and address");
  }
  return absl::OkStatus();
}

}  // namespace podscope::coordinator
