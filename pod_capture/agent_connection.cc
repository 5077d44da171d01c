#include "pod_capture/agent_connection.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_split.h"

namespace podscope::pod_capture {

std::string strip_grpc_scheme(std::string_view address) {
  constexpr std::string_view kScheme = "grpc://";
  if (address.starts_with(kScheme)) address.remove_prefix(kScheme.size());
  return std::string(address);
}

absl::StatusOr<std::vector<std::string>> parse_service_addresses(std::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view piece : absl::StrSplit(absl::string_view(list.data(), list.size()), ',')) {
    std::string address(piece);
    address.erase(0, address.find_first_not_of(" \t"));
    address.erase(address.find_last_not_of(" \t") + 1);
    address = strip_grpc_scheme(address);
    if (address.empty()) {
      return absl::InvalidArgumentError("empty address in service address list \"" + std::string(list) + "\"");
    }
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon + 1 == address.size() ||
        address.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
      return absl::InvalidArgumentError("service address \"" + address + "\" has no port (expected host:port)");
    }
    if (std::find(out.begin(), out.end(), address) != out.end()) {
      return absl::InvalidArgumentError("service address \"" + address + "\" is listed twice");
    }
    out.push_back(std::move(address));
  }
  return out;
}

std::string host_file_stem(std::string_view address) {
  std::string stem(address);
  std::replace(stem.begin(), stem.end(), ':', '_');
  return stem;
}

std::unique_ptr<AgentConnection> connect_agent(const std::string& address,
                                               std::shared_ptr<grpc::ChannelCredentials> credentials,
                                               const std::string& dial_target) {
  auto agent = std::make_unique<AgentConnection>();
  agent->address = address;
  agent->file_stem = host_file_stem(address);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  if (!dial_target.empty()) {
    const std::string host = address.substr(0, address.rfind(':'));
    args.SetSslTargetNameOverride(host.starts_with('[') ? host.substr(1, host.size() - 2) : host);
  }
  agent->channel = grpc::CreateCustomChannel(dial_target.empty() ? address : dial_target, std::move(credentials), args);
  agent->profiler = tensorflow::ProfilerService::NewStub(agent->channel);
  agent->agent = podscope::v1::Agent::NewStub(agent->channel);
  return agent;
}

ClockMeasurement measure_clock(AgentConnection& agent, const Clock& clock, int count, int timeout_ms) {
  ClockMeasurement out;
  std::vector<PingExchange> exchanges;
  for (int i = 0; i < count; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    // The first ping may also wait for the connection; later ones may not, so a stuck agent costs one timeout.
    if (i == 0) context.set_wait_for_ready(false);
    podscope::v1::PingRequest request;
    podscope::v1::PingResponse response;
    const int64_t t0 = clock.now_ns();
    request.set_client_send_ns(t0);
    const grpc::Status status = agent.agent->Ping(&context, request, &response);
    const int64_t t3 = clock.now_ns();
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      out.kind = ClockMeasurement::kNoPingRpc;
      out.detail = agent.address + " has no podscope ping RPC (a plain TF profiler server?): clock offset taken as 0";
      return out;
    }
    if (!status.ok()) {
      if (exchanges.empty()) {
        out.kind = ClockMeasurement::kUnreachable;
        out.detail = agent.address + ": ping failed: " + status.error_message();
        return out;
      }
      continue;
    }
    exchanges.push_back({t0, response.server_receive_ns(), response.server_send_ns(), t3});
    if (response.capture_start_lead_ms() > out.start_lead_ms) {
      out.start_lead_ms = response.capture_start_lead_ms();
      out.start_lead_reason = response.capture_start_lead_reason();
    }
    if (burst_settled(exchanges, kSettledExchanges)) break;
  }
  auto estimate = estimate_offset(exchanges);
  if (!estimate.ok()) {
    out.kind = ClockMeasurement::kUnreachable;
    out.detail = agent.address + ": " + std::string(estimate.status().message());
    return out;
  }
  out.kind = ClockMeasurement::kMeasured;
  out.estimate = *estimate;
  out.exchanges = std::move(exchanges);
  return out;
}

ClockMeasurement combine_clocks(const ClockMeasurement& before, const ClockMeasurement& after) {
  if (after.kind != ClockMeasurement::kMeasured) return before;
  if (before.kind != ClockMeasurement::kMeasured) return after;
  ClockMeasurement out = before;
  out.exchanges.insert(out.exchanges.end(), after.exchanges.begin(), after.exchanges.end());
  if (auto estimate = estimate_offset(out.exchanges); estimate.ok()) out.estimate = *estimate;
  return out;
}

std::vector<ClockMeasurement> measure_clocks(const std::vector<AgentConnection*>& agents, const Clock& clock, int count,
                                             int timeout_ms, int parallelism) {
  std::vector<ClockMeasurement> out(agents.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < agents.size(); i = next++) out[i] = measure_clock(*agents[i], clock, count, timeout_ms);
  };
  // No more ping threads than cores: a ping thread waiting for a core delays t0 or t3, and that delay lands
  // in the offset (one-sided) rather than only in the RTT.
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min({agents.size(), static_cast<size_t>(std::max(1, parallelism)), cores});
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return out;
}

}  // namespace podscope::pod_capture
