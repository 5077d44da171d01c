#include "pod_capture/agent_connection.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>

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
  std::optional<TrackedCall> tracked;  // before the context goes
  podscope::v1::PingResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<podscope::v1::PingResponse>> reader;
};

// One ping to every agent at once, within `deadline`: the agents that answer (a Ping, or UNIMPLEMENTED: a plain
// TF server) take part in the burst; the others are named with why in the answer (index → detail). On a fresh
// channel this is the connection's set-up too, which the burst's exchanges then do not carry.
std::map<size_t, std::string> probe_all(const std::vector<AgentConnection*>& agents,
                                        std::chrono::system_clock::time_point deadline, const Clock& clock,
                                        Cancellation* cancellation) {
  std::map<size_t, std::string> unreached;
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<PingCall>> calls(agents.size());
  for (size_t i = 0; i < agents.size(); ++i) {
    auto call = std::make_unique<PingCall>();
    call->agent = i;
    call->context.set_deadline(deadline);
    call->tracked.emplace(cancellation, &call->context);
    podscope::v1::PingRequest request;
    request.set_client_send_ns(clock.now_ns());
    call->reader = agents[i]->agent->PrepareAsyncPing(&call->context, request, &queue);
    call->reader->StartCall();
    call->reader->Finish(&call->response, &call->status, call.get());
    calls[i] = std::move(call);
  }
  for (size_t answered = 0; answered < agents.size(); ++answered) {
    void* tag = nullptr;
    bool ok = false;
    if (!queue.Next(&tag, &ok)) break;
    const PingCall& call = *static_cast<PingCall*>(tag);
    if (!call.status.ok() && call.status.error_code() != grpc::StatusCode::UNIMPLEMENTED) {
      unreached[call.agent] = agents[call.agent]->address + ": ping failed: " + call.status.error_message();
    }
  }
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {}
  return unreached;
}

// One agent's burst in progress.
struct Burst {
  ClockMeasurement measurement;
  int sent = 0;
  bool over = false;
};

// Sends one agent's next ping. The request (serialized when the call is prepared) carries a t0 for the agent to
// echo; the exchange's t0 is read again just before the call starts, so preparing it is not counted as the way up.
std::unique_ptr<PingCall> send_ping(AgentConnection& agent, size_t index, grpc::CompletionQueue& queue,
                                    const Clock& clock, int timeout_ms, Cancellation* cancellation) {
  auto call = std::make_unique<PingCall>();
  call->agent = index;
  call->context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  call->tracked.emplace(cancellation, &call->context);
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

// The window of a burst sized from what it observes (BurstPlan::sized_from_rtts): the agents' smallest RTTs so
// far and the client's time not spent waiting for answers.
class WindowSizer {
 public:
  WindowSizer(size_t agents, const Clock& clock, BurstPlan plan)
      : plan_(plan), clock_(clock), began_ns_(clock.now_ns()), smallest_rtt_(agents, 0) {}

  size_t size() const { return static_cast<size_t>(size_); }
  int64_t client_ns_per_ping() const {
    return sent_ > 0 ? (clock_.now_ns() - began_ns_ - waited_ns_) / static_cast<int64_t>(sent_) : 0;
  }
  void sent() { ++sent_; }
  void waited(int64_t ns) { waited_ns_ += ns; }

  bool behind() const { return behind_; }

  // An answered ping of `agent`, with `done` agents' bursts over; every few answers the window is sized again.
  void answered(size_t agent, const PingExchange& exchange, size_t done) {
    const int64_t rtt = exchange.rtt_ns();
    if (rtt <= 0) return;
    if (smallest_rtt_[agent] == 0 || rtt < smallest_rtt_[agent]) smallest_rtt_[agent] = rtt;
    if (!plan_.sized_from_rtts || ++answers_ % kAnswersPerSizing != 0) return;
    scratch_.clear();
    for (int64_t r : smallest_rtt_) {
      if (r > 0) scratch_.push_back(r);
    }
    std::nth_element(scratch_.begin(), scratch_.begin() + scratch_.size() / 2, scratch_.end());
    behind_ = behind_ || (plan_.finish_by_ns > 0 &&
                          burst_behind(began_ns_, clock_.now_ns(), done, smallest_rtt_.size(), plan_.finish_by_ns));
    size_ = ping_window_size(scratch_[scratch_.size() / 2], client_ns_per_ping(), plan_.max_in_flight);
  }

 private:
  // Often enough to follow a change of load within a small share of a large pod's burst; rarely enough that the
  // median costs nothing beside the pings.
  static constexpr size_t kAnswersPerSizing = 8;
  BurstPlan plan_;
  const Clock& clock_;
  int size_ = plan_.sized_from_rtts ? 1 : std::max(1, plan_.max_in_flight);
  int64_t began_ns_;
  int64_t waited_ns_ = 0;
  size_t sent_ = 0, answers_ = 0;
  bool behind_ = false;
  std::vector<int64_t> smallest_rtt_;  // 0: none yet
  std::vector<int64_t> scratch_;
};

}  // namespace

int64_t probe_wait_ms(size_t agents, int timeout_ms) {
  return timeout_ms + kProbeMsPerAgent * static_cast<int64_t>(agents);
}

ClockBurst measure_clocks(const std::vector<AgentConnection*>& agents, const Clock& clock, int count, int timeout_ms,
                          BurstPlan plan) {
  ClockBurst out;
  if (agents.empty()) return out;
  std::vector<Burst> bursts(agents.size());
  const std::map<size_t, std::string> unreached = probe_all(
      agents, std::chrono::system_clock::now() + std::chrono::milliseconds(probe_wait_ms(agents.size(), timeout_ms)),
      clock, plan.cancellation);
  std::deque<size_t> not_pinged;  // the connected agents, in order
  for (size_t i = 0; i < agents.size(); ++i) {
    if (auto it = unreached.find(i); it != unreached.end()) {
      bursts[i].measurement.detail = it->second;
    } else {
      not_pinged.push_back(i);
    }
  }
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<PingCall>> calls(agents.size());
  WindowSizer sizer(agents.size(), clock, plan);
  // Agents whose burst goes on wait here for a place in the window before any agent not yet pinged, so each
  // burst's pings follow one another closely.
  std::deque<size_t> going_on;
  size_t in_flight = 0, done = unreached.size();
  const auto cancelled = [&plan] { return plan.cancellation != nullptr && plan.cancellation->cancelled(); };
  auto fill_window = [&] {
    while (in_flight < sizer.size() && (!going_on.empty() || !not_pinged.empty()) && !cancelled()) {
      std::deque<size_t>& from = going_on.empty() ? not_pinged : going_on;
      const size_t i = from.front();
      from.pop_front();
      ++bursts[i].sent;
      calls[i] = send_ping(*agents[i], i, queue, clock, timeout_ms, plan.cancellation);
      sizer.sent();
      ++in_flight;
    }
    out.largest_window = std::max(out.largest_window, static_cast<int>(in_flight));
  };
  std::vector<PingCall*> answered;
  while (in_flight > 0 || ((!going_on.empty() || !not_pinged.empty()) && !cancelled())) {
    fill_window();
    if (in_flight == 0) break;
    // Every answer already in is read off the queue, each stamped t3 as it is taken, before any new ping goes
    // out: sending costs far more than taking an answer, and an answer left waiting meanwhile would have a late
    // t3 (a larger RTT, which the near-minimal-RTT filter then discards, but a wasted ping).
    answered.clear();
    void* tag = nullptr;
    bool ok = false;
    const int64_t waiting_since = clock.now_ns();
    if (!queue.Next(&tag, &ok)) break;
    sizer.waited(clock.now_ns() - waiting_since);
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
      const size_t exchanges_before = bursts[i].measurement.exchanges.size();
      take_answer(*agents[i], *call, bursts[i],
                  sizer.behind() ? std::min(count, static_cast<int>(kSettledExchanges)) : count);
      if (bursts[i].measurement.exchanges.size() > exchanges_before)
        sizer.answered(i, bursts[i].measurement.exchanges.back(), done);
      calls[i].reset();
      if (bursts[i].over) {
        ++done;
        finish_burst(*agents[i], bursts[i]);
      } else {
        going_on.push_back(i);
      }
    }
  }
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {}
  // A burst cut short keeps what the agents it was pinging had answered.
  for (size_t i = 0; i < bursts.size(); ++i) {
    if (!bursts[i].over && !bursts[i].measurement.exchanges.empty()) finish_burst(*agents[i], bursts[i]);
  }
  out.client_ns_per_ping = sizer.client_ns_per_ping();
  out.fell_behind = sizer.behind();
  out.clocks.reserve(bursts.size());
  for (size_t i = 0; i < bursts.size(); ++i) {
    if (bursts[i].sent == 0 && bursts[i].measurement.detail.empty())
      bursts[i].measurement.detail = agents[i]->address + ": not pinged: the capture was cancelled";
    out.clocks.push_back(std::move(bursts[i].measurement));
  }
  return out;
}

ClockMeasurement measure_clock(AgentConnection& agent, const Clock& clock, int count, int timeout_ms) {
  return std::move(measure_clocks({&agent}, clock, count, timeout_ms).clocks.front());
}

}  // namespace podscope::pod_capture
