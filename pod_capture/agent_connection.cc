#include "pod_capture/agent_connection.h"

#include <algorithm>
#include <chrono>

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
                                               std::shared_ptr<grpc::ChannelCredentials> credentials) {
  auto agent = std::make_unique<AgentConnection>();
  agent->address = address;
  agent->file_stem = host_file_stem(address);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  agent->channel = grpc::CreateCustomChannel(address, std::move(credentials), args);
  agent->profiler = tensorflow::ProfilerService::NewStub(agent->channel);
  agent->agent = podscope::v1::Agent::NewStub(agent->channel);
  return agent;
}

namespace {

// One agent's burst: `count` pings one after another, each sent as the previous one is answered.
struct PingBurst {
  size_t index = 0;
  int sent = 0;
  ClockMeasurement out;
  std::vector<PingExchange> exchanges;
  // The ping in flight.
  std::unique_ptr<grpc::ClientContext> context;
  podscope::v1::PingRequest request;
  podscope::v1::PingResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<podscope::v1::PingResponse>> reader;

  // Takes the answer to the ping in flight (received at t3_ns); false when the burst is over.
  bool answered(const std::string& address, int64_t t3_ns, int count) {
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      out.kind = ClockMeasurement::kNoPingRpc;
      out.detail = address + " has no podscope ping RPC (a plain TF profiler server?): clock offset taken as 0";
      return false;
    }
    if (status.ok()) {
      exchanges.push_back({request.client_send_ns(), response.server_receive_ns(), response.server_send_ns(), t3_ns});
    } else if (exchanges.empty()) {
      // A stuck agent costs one timeout: its first ping failed, so no more are sent.
      out.kind = ClockMeasurement::kUnreachable;
      out.detail = address + ": ping failed: " + status.error_message();
      return false;
    }
    return sent < count;
  }

  void estimate(const std::string& address) {
    if (out.kind == ClockMeasurement::kNoPingRpc || !out.detail.empty()) return;
    auto estimate = estimate_offset(exchanges);
    if (!estimate.ok()) {
      out.kind = ClockMeasurement::kUnreachable;
      out.detail = address + ": " + std::string(estimate.status().message());
      return;
    }
    out.kind = ClockMeasurement::kMeasured;
    out.estimate = *estimate;
    out.exchanges = std::move(exchanges);
  }
};

}  // namespace

ClockMeasurement measure_clock(AgentConnection& agent, const Clock& clock, int count, int timeout_ms) {
  return measure_clocks({&agent}, clock, count, timeout_ms, 1).front();
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
  grpc::CompletionQueue queue;
  std::vector<PingBurst> bursts(agents.size());
  auto send_ping = [&](PingBurst& burst) {
    burst.context = std::make_unique<grpc::ClientContext>();
    burst.context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    burst.response.Clear();
    ++burst.sent;
    burst.request.set_client_send_ns(clock.now_ns());
    burst.reader = agents[burst.index]->agent->AsyncPing(burst.context.get(), burst.request, &queue);
    burst.reader->Finish(&burst.response, &burst.status, &burst);
  };
  size_t started = 0;
  auto start_next = [&] {
    bursts[started].index = started;
    send_ping(bursts[started++]);
  };
  size_t in_flight = std::min(agents.size(), static_cast<size_t>(std::max(1, parallelism)));
  for (size_t i = 0; i < in_flight; ++i) start_next();
  void* tag = nullptr;
  bool ok = false;
  while (in_flight > 0 && queue.Next(&tag, &ok)) {
    const int64_t t3 = clock.now_ns();
    PingBurst& burst = *static_cast<PingBurst*>(tag);
    if (burst.answered(agents[burst.index]->address, t3, count)) {
      send_ping(burst);
      continue;
    }
    burst.reader.reset();
    burst.context.reset();
    if (started < agents.size()) {
      start_next();
    } else {
      --in_flight;
    }
  }
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {}
  std::vector<ClockMeasurement> out;
  out.reserve(agents.size());
  for (size_t i = 0; i < agents.size(); ++i) {
    bursts[i].estimate(agents[i]->address);
    out.push_back(std::move(bursts[i].out));
  }
  return out;
}

}  // namespace podscope::pod_capture
