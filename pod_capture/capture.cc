#include "pod_capture/capture.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <grpcpp/generic/generic_stub.h>

#include "podscope/v1/profile_answer.pb.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::pod_capture {
namespace {

using podscope::v1::SerializedProfileResponse;
using tensorflow::ProfileRequest;

bool is_retryable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::ALREADY_EXISTS ||
         status.error_message().find("Stream removed") != std::string::npos;
}

// The earliest capture_start_ns any plane of the space records (the agent's clock).
// The earliest value of a host-level stat over the space's planes.
std::optional<int64_t> earliest_stat(const tensorflow::profiler::XSpace& space, std::string_view stat) {
  std::optional<int64_t> out;
  for (const auto& plane : space.planes()) {
    const xspace::XPlaneReader reader(plane);
    if (auto value = reader.int_stat(stat)) {
      if (!out || *value < *out) out = *value;
    }
  }
  return out;
}

std::optional<int64_t> recorded_start(const tensorflow::profiler::XSpace& space) {
  return earliest_stat(space, xspace::kCaptureStartStat);
}

template <typename Response>
struct PendingCall {
  size_t index = 0;
  grpc::ClientContext context;
  std::optional<TrackedCall> tracked;  // before the context goes
  Response response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> reader;
};

template <typename Response>
struct FanOutAnswers {
  std::vector<grpc::Status> statuses;
  std::vector<Response> responses;
  int64_t issued_ns = 0;  // when the first wave of calls (every call, unless more than max_in_flight) was out
};
// Every host's answer, its XSpace still serialized: parsed, the answers of a pod would be held all at once.
using AttemptOutcome = FanOutAnswers<SerializedProfileResponse>;

// A large fan-out's first wave is issued by several threads (a call costs tens to hundreds of µs of this client's
// time, mostly in gRPC); each takes at least this many calls, so small fan-outs stay on this thread.
constexpr size_t kCallsPerIssuingThread = 64;
constexpr size_t kMaxIssuingThreads = 4;

// Sends one call to every agent through one completion queue and waits for all answers. At most
// `max_in_flight` calls are outstanding; the rest are issued as earlier ones complete. `start(i, context, queue)`
// issues agent i's call.
template <typename Response, typename Start>
FanOutAnswers<Response> fan_out(size_t agents, Start start, std::chrono::system_clock::time_point deadline,
                                int max_in_flight, const Clock& clock, Cancellation* cancellation) {
  FanOutAnswers<Response> out;
  out.statuses.resize(agents);
  out.responses.resize(agents);
  grpc::CompletionQueue queue;
  std::vector<std::unique_ptr<PendingCall<Response>>> calls(agents);
  size_t issued = 0;
  auto issue = [&](size_t i) {
    auto call = std::make_unique<PendingCall<Response>>();
    call->index = i;
    call->context.set_deadline(deadline);
    call->tracked.emplace(cancellation, &call->context);
    call->reader = start(i, &call->context, &queue);
    call->reader->Finish(&call->response, &call->status, call.get());
    calls[i] = std::move(call);
  };
  const size_t first_wave = std::min(agents, static_cast<size_t>(std::max(1, max_in_flight)));
  const size_t issuers = std::clamp<size_t>(first_wave / kCallsPerIssuingThread, 1, kMaxIssuingThreads);
  {
    std::vector<std::thread> helpers;
    for (size_t t = 1; t < issuers; ++t) {
      helpers.emplace_back([&, t] {
        for (size_t i = t; i < first_wave; i += issuers) issue(i);
      });
    }
    for (size_t i = 0; i < first_wave; i += issuers) issue(i);
    for (auto& helper : helpers) helper.join();
  }
  issued = first_wave;
  out.issued_ns = clock.now_ns();
  for (size_t done = 0; done < agents; ++done) {
    void* tag = nullptr;
    bool ok = false;
    if (!queue.Next(&tag, &ok)) break;
    auto* call = static_cast<PendingCall<Response>*>(tag);
    out.statuses[call->index] = call->status;
    out.responses[call->index] = std::move(call->response);
    calls[call->index].reset();
    if (issued < agents) issue(issued++);
  }
  queue.Shutdown();
  void* tag;
  bool ok;
  while (queue.Next(&tag, &ok)) {}
  return out;
}

// Profile at a common start, on every agent: tensorflow.ProfilerService's Profile on the agent's channel, as its
// generated stub calls it, with the answer read as SerializedProfileResponse.
AttemptOutcome profile_all(const std::vector<AgentConnection*>& agents, const std::vector<ProfileRequest>& requests,
                           std::chrono::system_clock::time_point deadline, int max_in_flight, const Clock& clock,
                           Cancellation* cancellation) {
  const std::string method = std::string("/") + tensorflow::ProfilerService::service_full_name() + "/Profile";
  return fan_out<SerializedProfileResponse>(
      agents.size(),
      [&](size_t i, grpc::ClientContext* context, grpc::CompletionQueue* queue) {
        grpc::TemplatedGenericStub<ProfileRequest, SerializedProfileResponse> stub(agents[i]->channel);
        auto reader = stub.PrepareUnaryCall(context, method, requests[i], queue);
        reader->StartCall();
        return reader;
      },
      deadline, max_in_flight, clock, cancellation);
}

// The same window of every agent's flight recorder, each on its own clock (`requests`), answered as Profile
// answers are.
AttemptOutcome recorded_windows(const std::vector<AgentConnection*>& agents,
                                const std::vector<podscope::v1::RecordedWindowRequest>& requests,
                                std::chrono::system_clock::time_point deadline, int max_in_flight, const Clock& clock,
                                Cancellation* cancellation) {
  FanOutAnswers<podscope::v1::RecordedWindowResponse> windows = fan_out<podscope::v1::RecordedWindowResponse>(
      agents.size(),
      [&](size_t i, grpc::ClientContext* context, grpc::CompletionQueue* queue) {
        return agents[i]->agent->AsyncGetRecordedWindow(context, requests[i], queue);
      },
      deadline, max_in_flight, clock, cancellation);
  AttemptOutcome out;
  out.issued_ns = windows.issued_ns;
  out.statuses = std::move(windows.statuses);
  out.responses.resize(agents.size());
  for (size_t i = 0; i < agents.size(); ++i) {
    out.responses[i].set_xspace(std::move(*windows.responses[i].mutable_xspace()));
    out.responses[i].set_written_to(std::move(*windows.responses[i].mutable_written_to()));
    out.responses[i].set_written_summary(std::move(*windows.responses[i].mutable_written_summary()));
    out.responses[i].set_host_analysis(std::move(*windows.responses[i].mutable_host_analysis()));
  }
  return out;
}

// The agents the opening clock-sync burst reached: only they are asked to capture and pinged again after.
std::vector<size_t> reached(const std::vector<ClockMeasurement>& clocks) {
  std::vector<size_t> out;
  for (size_t i = 0; i < clocks.size(); ++i) {
    if (clocks[i].kind != ClockMeasurement::kUnreachable) out.push_back(i);
  }
  return out;
}

template <typename T>
std::vector<T> pick(const std::vector<T>& all, const std::vector<size_t>& indices) {
  std::vector<T> out;
  out.reserve(indices.size());
  for (size_t i : indices) out.push_back(all[i]);
  return out;
}

// The answers of the asked agents (`asked[k]` answered `outcome`'s k-th) at their places among `hosts`.
AttemptOutcome spread(AttemptOutcome outcome, const std::vector<size_t>& asked, size_t hosts) {
  AttemptOutcome out;
  out.statuses.resize(hosts);
  out.responses.resize(hosts);
  for (size_t k = 0; k < asked.size(); ++k) {
    out.statuses[asked[k]] = std::move(outcome.statuses[k]);
    out.responses[asked[k]] = std::move(outcome.responses[k]);
  }
  return out;
}

// One attempt: a clock-sync burst, Profile to every agent at a common start, a second burst while they capture, the
// answers.
struct Attempt {
  std::vector<HostCapture> hosts;
  int64_t start_ns = 0;
  int64_t sync_begin_ns = 0;
  int64_t synced_ns = 0;
  int64_t issued_ns = 0;
  int64_t gathered_ns = 0;
  SecondBurstShape second_burst;
  long with_data = 0;
  bool retry_worthy = false;  // some host failed with an error worth another attempt
  // Some host captured but could not store its capture (ABORTED: an upload into a bucket failed, and the capture
  // was kept on its disk): another attempt would capture another window, not store this one.
  bool capture_not_stored = false;
};

ProfileRequest profile_request(const CaptureSpec& spec, const AgentConnection& agent, int64_t requested_start_ns) {
  ProfileRequest request;
  request.set_duration_ms(static_cast<uint64_t>(spec.duration_ms));
  request.set_max_events(kRequestedMaxEvents);
  request.add_tools("xplane.pb");
  request.set_emit_xspace(spec.repository_root.empty());
  request.set_repository_root(spec.repository_root);
  request.set_session_id(spec.session_id);
  request.set_host_name(agent.file_stem);
  auto* opts = request.mutable_opts();
  opts->set_version(1);
  opts->set_include_dataset_ops(spec.include_dataset_ops);
  opts->set_host_tracer_level(spec.host_tracer_level);
  opts->set_device_tracer_level(spec.device_tracer_level);
  opts->set_python_tracer_level(spec.python_tracer_level);
  opts->set_duration_ms(static_cast<uint64_t>(spec.duration_ms));
  opts->set_start_timestamp_ns(static_cast<uint64_t>(requested_start_ns));
  opts->set_session_id(spec.session_id);
  return request;
}

// Takes an answer that arrived into its host: the space is parsed, alone, for what the capture reads of it (its host
// name, whether it holds events, its recorded start, what its memory budget dropped), and kept serialized when it
// has events. DATA_LOSS when the space does not parse.
grpc::Status take_answer(HostCapture& host, SerializedProfileResponse& response) {
  ParsedAnswer parsed;
  // A capture written into a bucket comes as its summary: every plane without its lines.
  const bool written = !response.written_to().empty();
  if (!parsed.parse(written ? response.written_summary() : response.xspace())) {
    return grpc::Status(grpc::StatusCode::DATA_LOSS, "the answer's XSpace does not parse");
  }
  const tensorflow::profiler::XSpace& space = parsed.space();
  if (space.hostnames_size() > 0 && !space.hostnames(0).empty()) host.host_name = space.hostnames(0);
  if (response.empty_trace() || (!written && !xspace::has_events(space))) {
    host.error = "no trace event was collected";
    return grpc::Status::OK;
  }
  host.ok = true;
  host.xspace = std::move(*response.mutable_xspace());
  host.written_to = response.written_to();
  host.host_analysis = std::move(*response.mutable_host_analysis());
  host.budget_drops = budget_drops_of(space);
  if (auto start = recorded_start(space)) host.actual_start_merged_ns = *start - host.clock.estimate.offset_ns;
  if (auto whole = earliest_stat(space, xspace::kRecordedWholeSinceStat))
    host.recorded_whole_since_merged_ns = *whole - host.clock.estimate.offset_ns;
  return grpc::Status::OK;
}

// Takes each agent's answer into its HostCapture and counts the hosts with data.
void collect_answers(Attempt& attempt, AttemptOutcome& outcome, const std::vector<ClockMeasurement>& after,
                     int64_t last_ms) {
  for (size_t i = 0; i < attempt.hosts.size(); ++i) {
    HostCapture& host = attempt.hosts[i];
    host.clock_after = after[i];
    host.clock = combine_clocks(host.clock_before, host.clock_after);
    if (host.clock_before.kind == ClockMeasurement::kUnreachable) {
      // Not asked: an agent that does not answer a ping would hold the capture to its deadline.
      host.error = "not asked to capture: unreachable at the clock sync (" + host.clock_before.detail + ")";
      attempt.retry_worthy = true;
      continue;
    }
    grpc::Status status = outcome.statuses[i];
    if (status.ok()) status = take_answer(host, outcome.responses[i]);
    outcome.responses[i] = SerializedProfileResponse();  // what the host did not keep is freed now
    if (!status.ok()) {
      host.error = std::string(last_ms > 0 ? "GetRecordedWindow" : "Profile") + " failed (" +
                   std::to_string(status.error_code()) + "): " + status.error_message();
      attempt.retry_worthy |= is_retryable(status);
      attempt.capture_not_stored |= status.error_code() == grpc::StatusCode::ABORTED;
      continue;
    }
    if (host.ok) ++attempt.with_data;
  }
}

// The longest start lead the agents asked for in their clock-sync answers, and why ("" when none).
std::pair<int64_t, std::string> longest_start_lead(const std::vector<AgentConnection*>& agents,
                                                   const std::vector<ClockMeasurement>& clocks) {
  std::pair<int64_t, std::string> out{0, ""};
  for (size_t i = 0; i < clocks.size(); ++i) {
    if (clocks[i].start_lead_ms > out.first) {
      out = {clocks[i].start_lead_ms, agents[i]->file_stem + ": " + clocks[i].start_lead_reason};
    }
  }
  return out;
}

// The most pings the opening burst of a large pod keeps in flight: on the 2-core development machine a 1024-agent
// burst of 4 pings each is no shorter with 16 than with 8, and its error is twice as large (docs/capture.md).
constexpr size_t kOpeningBurstMaxInFlight = 8;

// The pings each agent gets in a large pod's opening burst: two, and the agents whose estimate is then looser than
// kLooseStartBoundNs (both pings held up: a descheduled client or agent) are pinged again (tighten_loose_starts).
constexpr int kOpeningBurstPingsInSharedWindow = 2;

// How the opening burst, which sets only the starts, pings `agents` agents: one at a time up to 255 agents (up to
// `pings` each); beyond, one ping in flight per 128 agents, at most kOpeningBurstMaxInFlight, and
// kOpeningBurstPingsInSharedWindow pings each. The pings of a shared window wait for one another, which costs each
// estimate tens to hundreds of microseconds: little beside the milliseconds by which a large pod's starts spread, and
// the merge offsets are pooled with the second burst's cleaner exchanges.
struct OpeningBurst {
  int pings = 0;
  BurstPlan plan;
};
OpeningBurst opening_burst_plan(size_t agents, int pings) {
  const int in_flight = static_cast<int>(std::clamp<size_t>(agents / 128, 1, kOpeningBurstMaxInFlight));
  if (in_flight == 1) return {pings, {}};
  return {std::min(pings, kOpeningBurstPingsInSharedWindow), {.max_in_flight = in_flight}};
}

// The loosest clock error bound a start is set with while a tighter one can be had: a millisecond, about the spread
// of a large pod's starts themselves (docs/capture.md, "Fan-out benchmark").
constexpr int64_t kLooseStartBoundNs = 1'000'000;

// Pings again the agents whose opening estimate is looser than kLooseStartBoundNs, with a window sized from the RTTs
// (one at a time where they share this client's CPUs, several across a network, where one at a time would spend
// the burst waiting on round trips), and pools both bursts: on a loaded client both of a shared window's pings to
// an agent can be held up for tens of milliseconds, and its start would be off by half that.
void tighten_loose_starts(const std::vector<AgentConnection*>& agents, std::vector<ClockMeasurement>& clocks,
                          const Clock& clock, Cancellation* cancellation) {
  std::vector<size_t> loose;
  for (size_t i = 0; i < clocks.size(); ++i) {
    if (clocks[i].kind == ClockMeasurement::kMeasured && clocks[i].estimate.error_bound_ns > kLooseStartBoundNs)
      loose.push_back(i);
  }
  if (loose.empty()) return;
  std::vector<AgentConnection*> again;
  for (size_t i : loose) again.push_back(agents[i]);
  const ClockBurst burst =
      measure_clocks(again, clock, static_cast<int>(kSettledExchanges), 1000,
                     {.max_in_flight = kSizedBurstMaxInFlight, .sized_from_rtts = true, .cancellation = cancellation});
  for (size_t k = 0; k < loose.size(); ++k) clocks[loose[k]] = combine_clocks(clocks[loose[k]], burst.clocks[k]);
}

// How long after the start instant the second burst waits, so that it takes no CPU from the agents' starts. On the
// loaded 2-core development machine, where 1024 in-process agents start on threads that wait for a core, a burst
// begun 50 ms after T made the last quarter of them start up to 100 ms late in 3 of 4 runs; begun 200 ms after T,
// it delayed none (4 runs, coord_fanout_bench).
constexpr int64_t kStartsPastMs = 200;

// The second clock-sync burst, run while the agents capture: it begins `wait_ms` after it is made (once their starts
// are past) or as soon as the answers are in, whichever comes first, with a window of pings sized from the RTTs it
// observes: one agent at a time where they share this client's CPUs, so its exchanges are the cleanest the pooled
// merge offsets get, and as many as the round trips leave room for across a network, so that over a large pod its
// time still hides in the capture's. A burst with a deadline (`finish_by_ns`, the capture's end) that is still going
// when the answers are in, past it, is ended there: the agents it did not reach keep their opening estimate, within
// its bound, and the capture is not held up for a better merge offset (a 1024-agent burst across an emulated network
// went on 0.3–8.8 s past the answers; docs/capture.md, "Fan-out benchmark"). Daemon stops end the capture's calls, so
// its answers, and with them this burst.
class SecondBurst {
 public:
  SecondBurst(const std::vector<AgentConnection*>& agents, const Clock& clock, int pings, int64_t wait_ms,
              int64_t finish_by_ns, Cancellation* cancellation)
      : clock_(clock), finish_by_ns_(finish_by_ns), outer_(cancellation), thread_([this, agents, pings, wait_ms] {
          {
            std::unique_lock lock(mu_);
            answered_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return answers_in_; });
          }
          burst_ = measure_clocks(agents, clock_, pings, 1000,
                                  {.max_in_flight = kSizedBurstMaxInFlight,
                                   .sized_from_rtts = true,
                                   .finish_by_ns = finish_by_ns_,
                                   .cancellation = &ended_});
        }) {}
  ~SecondBurst() {
    if (thread_.joinable()) thread_.join();
  }
  // Once the answers are in: the burst, when it is over (ended now when its deadline is past or the capture was
  // cancelled).
  ClockBurst take() {
    {
      std::lock_guard lock(mu_);
      answers_in_ = true;
    }
    answered_.notify_all();
    if ((finish_by_ns_ > 0 && clock_.now_ns() >= finish_by_ns_) || (outer_ != nullptr && outer_->cancelled()))
      ended_.cancel();
    thread_.join();
    return std::move(burst_);
  }

 private:
  const Clock& clock_;
  const int64_t finish_by_ns_;
  Cancellation* const outer_;
  Cancellation ended_;
  std::mutex mu_;
  std::condition_variable answered_;
  bool answers_in_ = false;
  ClockBurst burst_;
  std::thread thread_;
};

Attempt run_attempt(const std::vector<AgentConnection*>& agents, const CaptureSpec& spec, int attempt_number,
                    const Clock& clock, const std::function<void(const std::string& lead)>& announce) {
  Attempt attempt;
  attempt.hosts.resize(agents.size());
  attempt.sync_begin_ns = clock.now_ns();
  const OpeningBurst opening = opening_burst_plan(agents.size(), spec.clock_sync_pings);
  BurstPlan opening_plan = opening.plan;
  opening_plan.cancellation = spec.cancellation;
  ClockBurst opening_burst = measure_clocks(agents, clock, opening.pings, 1000, opening_plan);
  tighten_loose_starts(agents, opening_burst.clocks, clock, spec.cancellation);
  const std::vector<ClockMeasurement>& before = opening_burst.clocks;
  attempt.synced_ns = clock.now_ns();

  // A window of the past ends now (or where the spec says) and starts last_ms before; a capture starts at least
  // the fan-out margin ahead, and the lead some agent asks for (PyTorch processes that poll) on top.
  const auto [lead_ms, lead_reason] = longest_start_lead(agents, before);
  const int64_t margin_ms = fanout_margin_ms(agents.size(), opening_burst.client_ns_per_ping);

  const int64_t delay_ms =
      spec.last_ms > 0 ? 0 : std::max<int64_t>(spec.delay_ms, margin_ms + (lead_ms > 0 ? lead_ms + margin_ms : 0));
  announce(lead_ms > 0 && spec.last_ms <= 0 ? " in " + std::to_string(delay_ms) + " ms (" + lead_reason + ")" : "");
  const int64_t window_end_ns = spec.window_end_ns > 0 ? spec.window_end_ns : clock.now_ns();
  attempt.start_ns =
      spec.last_ms > 0 ? window_end_ns - spec.last_ms * 1'000'000 : clock.now_ns() + delay_ms * 1'000'000;
  std::vector<ProfileRequest> requests;
  std::vector<podscope::v1::RecordedWindowRequest> window_requests(agents.size());
  requests.reserve(agents.size());
  for (size_t i = 0; i < agents.size(); ++i) {
    HostCapture& host = attempt.hosts[i];
    host.address = agents[i]->address;
    host.file_stem = agents[i]->file_stem;
    host.host_name = agents[i]->file_stem;
    host.clock_before = before[i];
    host.attempts = attempt_number;
    host.requested_start_ns = attempt.start_ns + before[i].estimate.offset_ns;
    requests.push_back(profile_request(spec, *agents[i], host.requested_start_ns));
    window_requests[i].set_last_ms(spec.last_ms);
    window_requests[i].set_start_ns(host.requested_start_ns);
    window_requests[i].set_end_ns(window_end_ns + before[i].estimate.offset_ns);
    if (!spec.repository_root.empty()) {
      window_requests[i].set_repository_root(spec.repository_root);
      window_requests[i].set_session_id(spec.session_id);
      window_requests[i].set_host_name(agents[i]->file_stem);
    }
  }
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(delay_ms) +
                        std::chrono::milliseconds(answer_wait_ms(spec.duration_ms));
  const std::vector<size_t> asked = reached(before);
  // As many pings as a whole opening burst, once the starts are past: the merge offset is estimated from both
  // bursts (combine_clocks).
  // A capture's burst should be over when its answers come in, at the end of the window.
  SecondBurst second(pick(agents, asked), clock, spec.clock_sync_pings, spec.last_ms > 0 ? 0 : delay_ms + kStartsPastMs,
                     spec.last_ms > 0 ? 0 : attempt.start_ns + spec.duration_ms * 1'000'000, spec.cancellation);
  AttemptOutcome outcome = spec.last_ms > 0 ? recorded_windows(pick(agents, asked), pick(window_requests, asked),
                                                               deadline, spec.max_in_flight, clock, spec.cancellation)
                                            : profile_all(pick(agents, asked), pick(requests, asked), deadline,
                                                          spec.max_in_flight, clock, spec.cancellation);
  attempt.issued_ns = outcome.issued_ns;
  attempt.gathered_ns = clock.now_ns();
  std::vector<ClockMeasurement> after = before;
  const ClockBurst after_asked = second.take();
  for (size_t k = 0; k < asked.size(); ++k) after[asked[k]] = after_asked.clocks[k];
  attempt.second_burst = {after_asked.largest_window, after_asked.fell_behind};
  AttemptOutcome by_host = spread(std::move(outcome), asked, agents.size());
  collect_answers(attempt, by_host, after, spec.last_ms);
  return attempt;
}

// As TF's client: only transient errors, or nothing at all, are worth another attempt.
bool worth_another_attempt(const Attempt& attempt, size_t hosts) {
  if (attempt.with_data == static_cast<long>(hosts) || attempt.capture_not_stored) return false;
  return attempt.retry_worthy || attempt.with_data == 0;
}

// The line after an attempt that did not settle the capture: after the last one it gives up, else it retries.
std::string after_attempt_message(const Attempt& attempt, size_t hosts, int attempt_number, int attempts,
                                  long best_count) {
  if (attempt_number == attempts) {
    if (best_count == 0) {
      return "No trace event is collected after " + std::to_string(attempts) +
             " attempt(s). Perhaps, you want to try again (with more attempts?).\n"
             "Tip: increase number of attempts with --num_tracing_attempts.";
    }
    return std::to_string(hosts - best_count) + " host(s) returned no data after " + std::to_string(attempts) +
           " attempt(s); keeping the attempt with the most hosts.\n"
           "Tip: increase number of attempts with --num_tracing_attempts.";
  }
  if (attempt.with_data == 0 && !attempt.retry_worthy) return "No trace event is collected. Automatically retrying.";
  return std::to_string(hosts - attempt.with_data) + " of " + std::to_string(hosts) +
         " host(s) failed; retrying on every host with a new start time.";
}

// A window of the past: a host whose recorder holds less than asked (by more than a hundredth) says so.
void warn_of_short_windows(CaptureResult& result) {
  if (result.last_ms <= 0) return;
  const int64_t asked_ns = result.last_ms * 1'000'000;
  for (const auto& host : result.hosts) {
    if (!host.ok || !host.recorded_whole_since_merged_ns) continue;
    const int64_t held_ns = std::min(asked_ns, result.start_ns + asked_ns - *host.recorded_whole_since_merged_ns);
    if (held_ns >= asked_ns - asked_ns / 100) continue;
    char held[32];
    std::snprintf(held, sizeof held, "%.3f", static_cast<double>(std::max<int64_t>(0, held_ns)) * 1e-6);
    result.warnings.push_back(host.host_name + " holds only the last " + held + " ms of the " +
                              std::to_string(result.last_ms) +
                              " ms asked whole (its flight recorder's window or memory cap, flight_recorder_seconds / "
                              "flight_recorder_max_mb, is too small for its event rate; see its XSpace's warnings)");
  }
}

// The warnings and start skew of the kept attempt.
void summarize_hosts(CaptureResult& result) {
  for (const auto& host : result.hosts) {
    if (host.clock_before.kind == ClockMeasurement::kNoPingRpc) result.warnings.push_back(host.clock_before.detail);
  }
  warn_of_short_windows(result);
  std::optional<int64_t> first, last;
  for (const auto& host : result.hosts) {
    if (!host.actual_start_merged_ns) continue;
    if (!first || *host.actual_start_merged_ns < *first) first = host.actual_start_merged_ns;
    if (!last || *host.actual_start_merged_ns > *last) last = host.actual_start_merged_ns;
  }
  if (first) result.start_skew_ns = *last - *first;
}

}  // namespace

int CaptureResult::exit_code() const {
  const auto with_data = std::count_if(hosts.begin(), hosts.end(), [](const HostCapture& h) { return h.ok; });
  if (with_data == 0) return 1;
  return with_data == static_cast<long>(hosts.size()) ? 0 : 3;
}

int64_t answer_wait_ms(int64_t duration_ms) { return 2 * duration_ms + 10'000; }

int64_t fanout_margin_ms(size_t host_count, int64_t client_ns_per_call) {
  // From the opening burst's end to the last Profile call issued, a client spends per agent 0.7–1.4 times its time
  // per ping in that burst (1024 in-process agents on the loaded 2-core development machine, the first wave issued
  // by kMaxIssuingThreads threads while the agents' servers take their share of the CPUs); twice it leaves room for a
  // load that grows meanwhile, never less than 125 µs per agent. 100 ms covers the network and a loaded scheduler.
  const int64_t per_call_ns = std::max<int64_t>(125'000, 2 * client_ns_per_call);
  return 100 + static_cast<int64_t>(host_count) * per_call_ns / 1'000'000;
}

CaptureResult run_capture(const std::vector<AgentConnection*>& agents, const CaptureSpec& spec, const Clock& clock,
                          const ProgressFn& progress) {
  CaptureResult result;
  result.session_id = spec.session_id;
  result.duration_ms = spec.duration_ms;
  result.last_ms = spec.last_ms;
  result.trigger = spec.trigger;
  const int attempts = std::max(1, spec.num_tracing_attempts);
  long best_count = -1;
  for (int attempt_number = 1; attempt_number <= attempts; ++attempt_number) {
    // Announced after the clock-sync burst, which tells how far ahead the agents need the start.
    const auto announce = [&](const std::string& lead) {
      progress(spec.last_ms > 0 ? "Capturing the last " + std::to_string(spec.last_ms) + " ms the agents recorded."
                                : "Starting to trace for " + std::to_string(spec.duration_ms) + " ms" + lead +
                                      ". Remaining attempt(s): " + std::to_string(attempts - attempt_number));
    };
    Attempt attempt = run_attempt(agents, spec, attempt_number, clock, announce);
    result.attempts = attempt_number;
    if (attempt.with_data > best_count) {
      best_count = attempt.with_data;
      result.hosts = std::move(attempt.hosts);
      result.start_ns = attempt.start_ns;
      result.kept_attempt = attempt_number;
      result.sync_begin_ns = attempt.sync_begin_ns;
      result.synced_ns = attempt.synced_ns;
      result.issued_ns = attempt.issued_ns;
      result.gathered_ns = attempt.gathered_ns;
      result.second_burst = attempt.second_burst;
    }
    if (!worth_another_attempt(attempt, agents.size())) break;
    if (spec.stop_retrying && spec.stop_retrying()) break;
    if (spec.cancellation != nullptr && spec.cancellation->cancelled()) break;
    progress(after_attempt_message(attempt, agents.size(), attempt_number, attempts, best_count));
  }
  summarize_hosts(result);
  return result;
}

std::vector<BudgetDrop> budget_drops_of(const tensorflow::profiler::XSpace& space) {
  std::vector<BudgetDrop> out;
  for (const auto& plane : space.planes()) {
    if (plane.name().rfind(xspace::kCustomPlanePrefix, 0) != 0) continue;
    const xspace::XPlaneReader reader(plane);
    const auto events = reader.int_stat(xspace::kDroppedEventsStat);
    if (!events) continue;
    out.push_back({plane.id(), reader.int_stat(xspace::kClientPidStat).value_or(0), *events,
                   reader.int_stat(xspace::kDroppedStepsStat).value_or(0)});
  }
  return out;
}

}  // namespace podscope::pod_capture
