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

ClockMeasurement combine_clocks(const ClockMeasurement& before, const ClockMeasurement& after) {
  if (after.kind != ClockMeasurement::kMeasured) return before;
  if (before.kind != ClockMeasurement::kMeasured) return after;
  ClockMeasurement out = before;
  out.exchanges.insert(out.exchanges.end(), after.exchanges.begin(), after.exchanges.end());
  if (auto estimate = estimate_offset(out.exchanges); estimate.ok()) out.estimate = *estimate;
  return out;
}

namespace {

// One ping in flight: its t0 and what the completion queue fills in.
struct PingCall {
  size_t agent = 0;
  int64_t t0_ns = 0;
  int64_t t3_ns = 0;
  grpc::ClientContext context;
  podscope::v1::PingResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<podscope::v1::PingResponse>> reader;
};

// One agent's burst in progress.
struct Burst {
  ClockMeasurement measurement;
  int sent = 0;
  bool over = false;
};

// Sends one agent's next ping. The request (serialized when the call is prepared) carries a t0 for the agent to
// echo; the exchange's t0 is read again just before the call starts, so preparing it is not counted as the way up.
std::unique_ptr<PingCall> send_ping(AgentConnection& agent, size_t index, grpc::CompletionQueue& queue,
                                    const Clock& clock, int timeout_ms) {
  auto call = std::make_unique<PingCall>();
  call->agent = index;
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  podscope::v1::PingRequest request;
  request.set_client_send_ns(clock.now_ns());
  call->reader = agent.agent->PrepareAsyncPing(&call->context, request, &queue);
  call->t0_ns = clock.now_ns();
  call->reader->StartCall();
  call->reader->Finish(&call->response, &call->status, call.get());
  return call;
}

// Takes one answered (or failed) ping into its burst; the burst is over once the agent has no Ping RPC, its
// first ping failed, it settled (burst_settled) or it had `count` pings.
void take_answer(const AgentConnection& agent, const PingCall& call, Burst& burst, int count) {
  ClockMeasurement& out = burst.measurement;
  if (call.status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    out.kind = ClockMeasurement::kNoPingRpc;
    out.detail = agent.address + " has no podscope ping RPC (a plain TF profiler server?): clock offset taken as 0";
    burst.over = true;
    return;
  }
  if (!call.status.ok()) {
    // A stuck or absent agent costs one timeout: its burst ends at its first failure.
    if (out.exchanges.empty()) {
      out.detail = agent.address + ": ping failed: " + call.status.error_message();
      burst.over = true;
      return;
    }
  } else {
    out.exchanges.push_back(
        {call.t0_ns, call.response.server_receive_ns(), call.response.server_send_ns(), call.t3_ns});
    if (call.response.capture_start_lead_ms() > out.start_lead_ms) {
      out.start_lead_ms = call.response.capture_start_lead_ms();
      out.start_lead_reason = call.response.capture_start_lead_reason();
    }
  }
  burst.over = burst.sent >= count || burst_settled(out.exchanges, kSettledExchanges);
}

// The estimate of a burst that is over (kNoPingRpc and failed first pings are already decided).
void finish_burst(const AgentConnection& agent, Burst& burst) {
  ClockMeasurement& out = burst.measurement;
  if (out.kind == ClockMeasurement::kNoPingRpc || out.exchanges.empty()) {
    out.exchanges.clear();
    return;
  }
  auto estimate = estimate_offset(out.exchanges);
  if (!estimate.ok()) {
    out.kind = ClockMeasurement::kUnreachable;
    out.detail = agent.address + ": " + std::string(estimate.status().message());
    out.exchanges.clear();
    return;
  }
  out.kind = ClockMeasurement::kMeasured;
  out.estimate = *estimate;
}

}  // namespace

std::vector<ClockMeasurement> measure_clocks(const std::vector<AgentConnection*>& agents, const Clock& clock, int count,
                                             int timeout_ms, int max_in_flight) {
  std::vector<Burst> bursts(agents.size());
  if (agents.empty()) return {};
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<PingCall>> calls(agents.size());
  size_t next_agent = 0, in_flight = 0;
  auto send = [&](size_t i) {
    ++bursts[i].sent;
    calls[i] = send_ping(*agents[i], i, queue, clock, timeout_ms);
    ++in_flight;
  };
  const size_t window = static_cast<size_t>(std::max(1, max_in_flight));
  std::vector<PingCall*> answered;
  while (in_flight > 0 || next_agent < agents.size()) {
    while (in_flight < window && next_agent < agents.size()) send(next_agent++);
    // Every answer already in is read off the queue, each stamped t3 as it is taken, before any new ping goes
    // out: sending costs far more than taking an answer, and an answer left waiting meanwhile would have a late
    // t3 (a larger RTT, which the near-minimal-RTT filter then discards, but a wasted ping).
    answered.clear();
    void* tag = nullptr;
    bool ok = false;
    if (!queue.Next(&tag, &ok)) break;
    for (;;) {
      auto* call = static_cast<PingCall*>(tag);
      call->t3_ns = clock.now_ns();
      answered.push_back(call);
      if (queue.AsyncNext(&tag, &ok, std::chrono::system_clock::time_point()) != grpc::CompletionQueue::GOT_EVENT)
        break;
    }
    for (PingCall* call : answered) {
      const size_t i = call->agent;
      --in_flight;
      take_answer(*agents[i], *call, bursts[i], count);
      calls[i].reset();
      if (bursts[i].over) {
        finish_burst(*agents[i], bursts[i]);
      } else {
        send(i);
      }
    }
  }
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {}
  std::vector<ClockMeasurement> out;
  out.reserve(bursts.size());
  for (auto& burst : bursts) out.push_back(std::move(burst.measurement));
  return out;
}

ClockMeasurement measure_clock(AgentConnection& agent, const Clock& clock, int count, int timeout_ms) {
  return std::move(measure_clocks({&agent}, clock, count, timeout_ms).front());
}

}  // namespace podscope::pod_capture
