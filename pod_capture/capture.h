// The synchronized pod capture, shared by `podscope capture` and podscope-coordinator:
// clock-sync burst per agent → one start instant T in coordinator time → Profile(start = T + offset_i)
// to every agent at once (async, bounded in flight) → a second clock-sync burst while they capture → gather.
// A failed attempt (retryable errors or no events anywhere) is retried on every host with a new T.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/arena.h>

#include "pod_capture/agent_connection.h"
#include "pod_capture/cancellation.h"
#include "daemon/clock.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::pod_capture {

// What a capture lasts when its request names no duration (capture_tpu_profile's default).
constexpr int64_t kDefaultCaptureDurationMs = 1000;

// What froze a triggered pod snapshot: one agent's slow step (capture.json's "trigger").
struct SnapshotTrigger {
  std::string host_name;  // the worker that reported it
  std::string reason;     // "slow_step"
  int32_t pid = 0;
  std::string program;
  int32_t core_id = 0;
  int64_t step_num = 0;
  int64_t step_ns = 0;
  int64_t median_ns = 0;    // the process's rolling median step time
  int64_t step_end_ns = 0;  // coordinator time
  std::string agent_snapshot_id;
};

// A complete capture: pod_run.h's capture_spec_from fills one from a request, defaults applied.
struct CaptureSpec {
  int64_t duration_ms = kDefaultCaptureDurationMs;
  int num_tracing_attempts = 3;
  int64_t delay_ms = 0;  // the user's delay; the start is at least the fan-out margin away
  bool include_dataset_ops = true;
  uint32_t host_tracer_level = 2;
  uint32_t device_tracer_level = 1;
  uint32_t python_tracer_level = 0;
  std::string session_id;  // sent to agents; also the run name (tf_run_name when the client gave none)
  // > 0: not a window from a future start but the last last_ms ms each agent's flight recorder holds, now
  // (duration_ms is then last_ms, and one attempt is made: the past does not come again).
  int64_t last_ms = 0;
  // With last_ms: where the window ends, coordinator time (0: now). Every agent is asked for the same window,
  // translated to its clock by its measured offset.
  int64_t window_end_ns = 0;
  std::optional<SnapshotTrigger> trigger;  // set for a triggered pod snapshot
  // A bucket (gs://, s3://) where the runs are (<logdir>/plugins/profile): each agent writes its own host file into
  // <repository_root>/<session_id>/ and answers only where, as TensorFlow's servers write a gs:// logdir. Empty: the
  // agents answer with their captures.
  std::string repository_root;
  int clock_sync_pings = 16;
  int max_in_flight = 4096;
  // Polled between attempts: true stops retrying (the user interrupted the capture).
  std::function<bool()> stop_retrying;
  // Ends the capture at once from another thread (its daemon stops): its calls are cancelled; none: never.
  Cancellation* cancellation = nullptr;
};

// ProfileRequest.max_events as TensorFlow's client always sends it; servers (TensorFlow's and ours) ignore it.
inline constexpr int64_t kRequestedMaxEvents = 1'000'000;

// What a host's capture memory budget dropped on one core (its `/device:CUSTOM:<core>` plane's stats).
struct BudgetDrop {
  int64_t core = 0, pid = 0, events = 0, steps = 0;
};
std::vector<BudgetDrop> budget_drops_of(const tensorflow::profiler::XSpace& space);

// One host's answer parsed on an arena of its own: parsing it costs about 0.7 times what it costs on the heap, and
// letting it go a fifth (one free per block instead of one per object; docs/capture.md, "Memory").
class ParsedAnswer {
 public:
  // false when `bytes` are not an XSpace.
  bool parse(const std::string& bytes) { return space_->ParseFromString(bytes); }
  tensorflow::profiler::XSpace& space() { return *space_; }

 private:
  google::protobuf::Arena arena_;
  tensorflow::profiler::XSpace* space_ = google::protobuf::Arena::CreateMessage<tensorflow::profiler::XSpace>(&arena_);
};

struct HostCapture {
  std::string address;
  std::string file_stem;
  std::string host_name;  // the agent's own name when it reported one, else the file stem
  bool ok = false;        // returned a non-empty XSpace
  std::string error;      // why not
  // The agent's XSpace as it answered, serialized, until its file is written (write_run_files); the analysis reads
  // the file. Parsed, a space costs several times its bytes: it is parsed one host at a time, when it arrives and
  // when its file is written (docs/capture.md, "Memory").
  std::string xspace;
  std::vector<BudgetDrop> budget_drops;  // read from the space when it arrives
  std::string written_to;                // the object the agent wrote its capture into (CaptureSpec::repository_root)
  std::string host_analysis;             // then its analysis, as the agent made it (a serialized HostAnalysis)
  ClockMeasurement clock_before;         // sets the start on the agent's clock
  ClockMeasurement clock_after;          // the second burst, while the agents captured
  ClockMeasurement clock;          // both bursts pooled (combine_clocks): the offset the host's times are merged with
  int64_t requested_start_ns = 0;  // on the agent's clock
  std::optional<int64_t> actual_start_merged_ns;  // the agent's recorded start, in coordinator time
  // A flight recorder window's: from when on the agent holds every annotated process whole, coordinator time.
  std::optional<int64_t> recorded_whole_since_merged_ns;
  int attempts = 0;
  double clock_drift_ppm = 0;  // only the coordinator daemon's long series sets it
};

// How the second clock-sync burst ran: the most pings it held in flight (its window, sized from the RTTs it saw),
// and whether it fell behind its deadline (the window's end) and gave the remaining agents fewer pings.
struct SecondBurstShape {
  int largest_window = 0;
  bool fell_behind = false;
};

struct CaptureResult {
  std::string session_id;
  int attempts = 0;      // attempts made
  int kept_attempt = 0;  // the attempt whose results these are (the one with the most hosts)
  int64_t start_ns = 0;  // T, coordinator time, of the attempt kept
  // Coordinator times of that attempt: its clock-sync burst began, it was over, every call of the fan-out was
  // issued, every answer was in.
  int64_t sync_begin_ns = 0;
  int64_t synced_ns = 0;
  int64_t issued_ns = 0;
  int64_t gathered_ns = 0;
  SecondBurstShape second_burst;
  int64_t duration_ms = 0;
  int64_t last_ms = 0;  // > 0: a window of the agents' flight recorders, [start_ns, start_ns + last_ms]
  std::optional<SnapshotTrigger> trigger;
  std::optional<int64_t> start_skew_ns;  // max − min of the hosts' actual starts in coordinator time
  std::vector<HostCapture> hosts;
  std::vector<std::string> warnings;
  // How long the pod analysis of the written files took (set once it ran; capture.json is written again then).
  std::optional<int64_t> analyzed_in_ms;
  // 0: every host returned data; 3: some did; 1: none did.
  int exit_code() const;
};

using ProgressFn = std::function<void(const std::string& line)>;

// How long after its start a capture of `duration_ms` waits for an agent's answer: the window itself, as long
// again for the agent to gather and send it, and 10 s for a loaded host. An agent that answers no later is
// named with DEADLINE_EXCEEDED and the capture goes on with the rest.
int64_t answer_wait_ms(int64_t duration_ms);

// How far ahead of "now" the common start is put so every Profile call arrives before it, given the client's time
// per call measured in the opening clock-sync burst (ClockBurst::client_ns_per_ping).
int64_t fanout_margin_ms(size_t host_count, int64_t client_ns_per_call);

CaptureResult run_capture(const std::vector<AgentConnection*>& agents, const CaptureSpec& spec, const Clock& clock,
                          const ProgressFn& progress);

}  // namespace podscope::pod_capture
