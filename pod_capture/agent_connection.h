// One agent as the capture library sees it: its address, the file stem TensorBoard will show as its host,
// a channel, and stubs for tensorflow.ProfilerService and podscope.v1.Agent.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "pod_capture/cancellation.h"
#include "pod_capture/clock_sync.h"
#include "daemon/clock.h"
#include "podscope/v1/agent.grpc.pb.h"
#include "tensorflow/profiler_service.grpc.pb.h"

namespace podscope::pod_capture {

// `address` without the "grpc://" prefix TF's tools accept on an address (agents and coordinators alike).
std::string strip_grpc_scheme(std::string_view address);

// Splits a comma list of host:port (an optional "grpc://" prefix is stripped, as TF's tools do).
// Rejects empty entries and entries without a port.
absl::StatusOr<std::vector<std::string>> parse_service_addresses(std::string_view list);

// The host file stem TF's client derives from an address: ':' → '_' ("10.0.0.2:8466" → "10.0.0.2_8466").
std::string host_file_stem(std::string_view address);

struct AgentConnection {
  std::string address;
  std::string file_stem;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<tensorflow::ProfilerService::Stub> profiler;
  std::unique_ptr<podscope::v1::Agent::Stub> agent;
};

// Channels accept responses of any size: a host's XSpace can be far larger than gRPC's 4 MiB default.
// `credentials` come from tls::channel_credentials (plaintext when TLS is off); one object may serve every agent.
// A non-empty `dial_target` (a resolved gRPC target such as "ipv4:10.0.0.2:8466") is dialled instead of `address`,
// and the server's certificate is still verified against `address`'s host.
std::unique_ptr<AgentConnection> connect_agent(const std::string& address,
                                               std::shared_ptr<grpc::ChannelCredentials> credentials,
                                               const std::string& dial_target = "");

// What a clock-sync burst against one agent found.
struct ClockMeasurement {
  enum Kind { kMeasured, kNoPingRpc, kUnreachable } kind = kUnreachable;
  ClockEstimate estimate;               // offset 0 unless kMeasured
  std::string detail;                   // why not measured
  std::vector<PingExchange> exchanges;  // the answered pings, so bursts can be pooled (combine_clocks)
  // How far ahead the agent needs a capture requested, and why (PingResponse.capture_start_lead_ms): the
  // longest any ping of the burst answered.
  int64_t start_lead_ms = 0;
  std::string start_lead_reason;
};

// One estimate from two bursts of the same agent (before and after a capture): all their pings together,
// so the near-minimal-RTT filter keeps the cleanest exchanges of either. On a loaded host one burst's
// smallest RTT can be several times the other's, and the offset error grows with it. Falls back to
// whichever burst was measured.
ClockMeasurement combine_clocks(const ClockMeasurement& before, const ClockMeasurement& after);

// A burst ends early once this many of its exchanges are near its smallest RTT (burst_settled).
inline constexpr size_t kSettledExchanges = 4;

// How a burst paces its pings: how many of different agents it keeps in flight through its completion queue (each
// agent's own pings go one after another), and by when it should be over.
struct BurstPlan {
  int max_in_flight = 1;
  // false: always max_in_flight (the opening burst, which only sets the starts, trades accuracy for time).
  // true: sized as the burst goes from the RTTs it observes and the client's own time per ping
  // (ping_window_size), up to max_in_flight: one at a time where the agents share the client's CPUs, more
  // across a network, where a burst pinging one agent at a time would spend its time waiting.
  bool sized_from_rtts = false;
  // With sized_from_rtts, when the burst should be over (coordinator clock; 0: whenever). A burst that at its pace
  // would end later (burst_behind, checked each time the window is sized) trades accuracy for time: from then on
  // each agent gets at most kSettledExchanges pings. Its window stays what the RTTs allow, since a larger one would
  // raise every RTT; every estimate keeps its own bound (half the largest RTT it kept), so what fewer pings cost
  // shows in the bounds reported.
  int64_t finish_by_ns = 0;
  // Ends the burst from another thread (its pings are cancelled, no more are sent; the agents that had answered keep
  // their estimates); none: never.
  Cancellation* cancellation = nullptr;
};

// The most pings a burst sized from its RTTs keeps in flight (the second burst of a capture, the coordinator's
// periodic one): the window follows the RTTs it observes, so this bounds only how many agents are in progress.
inline constexpr int kSizedBurstMaxInFlight = 16;

// What one burst found: every agent's measurement, and what it observed of the client.
struct ClockBurst {
  std::vector<ClockMeasurement> clocks;  // in the agents' order
  // This thread's time per ping sent, not waiting for answers (preparing and sending calls, taking answers): how
  // fast this client issues calls right now, load included.
  int64_t client_ns_per_ping = 0;
  int largest_window = 0;    // the most pings it held in flight at once
  bool fell_behind = false;  // it traded accuracy for time to be over by BurstPlan::finish_by_ns
};

// How long a burst's first ping to every agent, all at once, is waited for: `timeout_ms`, and kProbeMsPerAgent more
// per agent (their connections' set-up and answers share this client's CPUs).
inline constexpr int64_t kProbeMsPerAgent = 5;
int64_t probe_wait_ms(size_t agents, int timeout_ms);

// Measures every agent's clock. First every agent gets one ping, all at once, answered within probe_wait_ms: an agent
// that does not answer it (unreachable, a host that drops the connection, a server that never answers) is
// kUnreachable at no further cost, so that however many such agents there are, a burst waits for them once. Then each
// agent that answered gets up to `count` pings in sequence (each bounded by `timeout_ms`; fewer once its burst
// settles; one failed first ping ends it), from this thread through one completion queue, with pings of different
// agents in flight at once as `plan` says. One at a time gives the cleanest exchanges where the agents share the
// client's CPUs; there a fixed larger window makes a large pod's burst shorter, but every ping then waits for the
// others (to be sent, or to be read once answered), and although estimate_offset keeps only the near-minimal-RTT
// exchanges, the smallest RTT itself grows with the window, and the error with it (docs/capture.md, "Clock sync").
ClockBurst measure_clocks(const std::vector<AgentConnection*>& agents, const Clock& clock, int count, int timeout_ms,
                          BurstPlan plan = {});

// measure_clocks for one agent.
ClockMeasurement measure_clock(AgentConnection& agent, const Clock& clock, int count, int timeout_ms);

}  // namespace podscope::pod_capture
