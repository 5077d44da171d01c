// Kineto's Chrome-JSON trace (what torch.profiler writes: `*.pt.trace.json`) → XPlanes laid out as podscope's
// CUPTI converter and annotated processes lay them out, so every analysis tool reads a PyTorch rank as it reads
// those (docs/kineto.md):
//   /host:CPU              host threads, one line per thread: cpu_op, user_annotation and python_function events;
//                          record_param_comms carries its collective, bytes, process group and ranks.
//   /host:CUPTI            CUDA runtime and driver calls, one line per thread, with their correlation ids.
//   /device:GPU:<device>   one line per stream, "Stream #<id>(<kinds>)": kernels with `kernel_details`, memcpy and
//                          memset with their bytes, correlation ids and the PyTorch op that launched them
//                          (`framework_op`); NCCL kernels carry their collective and the stats of their
//                          record_param_comms; a `Steps` line from the host's steps.
//   /device:CUSTOM:<rank>  ranks without GPU work (gloo on CPU): the host threads' events with their collectives
//                          named as XLA names them ("all-reduce"...) and a `Steps` line: the rank is the core.
// Times are Unix ns: Kineto's µs timestamps are relative to `baseTimeNanoseconds` when the trace has it.
// Pure: bytes in, XSpace out. Parsing and building are two phases: the parse reads the text as it arrives, a window of
// whole events at a time, into compact records (never holding the text), and the build lays the records out as
// planes, which it can serialize as it goes (never holding them as objects either).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::kineto {

// What a trace's events become, before they are laid out as planes.
enum class EventKind : uint8_t { kHostOp, kRuntime, kKernel, kMemcpy, kMemset };

// One event, compact: strings are interned in KinetoTrace::names.
struct TraceEvent {
  EventKind kind = EventKind::kHostOp;
  bool cpu_op = false;  // a host op of category `cpu_op` (an ATen op): the host side's framework op
  uint32_t name = 0;
  int64_t start_ns = 0;  // relative to the trace's base until built
  int64_t duration_ns = 0;
  int64_t pid = 0;  // host events: process; device events: device
  int64_t tid = 0;  // host events: thread; device events: stream
  int64_t correlation = -1;
  uint32_t detail = UINT32_MAX;  // index into KinetoTrace::kernels / copies / collectives, or none
  uint32_t order = 0;            // the event's index among those kept: orders events that start together
};

struct KernelLaunch {
  int64_t external_id = -1;  // the op (or record_param_comms) that launched it
  int64_t context = 0;
  int64_t registers = 0;
  int64_t shared_memory = 0;
  int64_t grid[3] = {0, 0, 0};
  int64_t block[3] = {0, 0, 0};
  uint32_t collective = UINT32_MAX;  // the "Collective name" argument (interned) when Kineto gives one
};

struct DeviceCopy {
  int64_t bytes = -1;
  int64_t external_id = -1;  // the op that launched it
};

// A collective as its host event (record_param_comms, nccl:* or gloo:* annotations) describes it.
struct Collective {
  int64_t external_id = -1;
  uint32_t name = UINT32_MAX;  // the collective ("allreduce"), interned
  int64_t bytes = -1;
  uint32_t process_group = UINT32_MAX;
  uint32_t ranks = UINT32_MAX;  // "0,1,2"
  int64_t group_size = -1;
};

struct KinetoTrace {
  std::vector<TraceEvent> events;
  std::vector<std::string> names;
  std::vector<KernelLaunch> kernels;
  std::vector<DeviceCopy> copies;
  // External id → the host op (cpu_op or user_annotation, interned name) that carries it: a device op's External id
  // is that of the innermost op around its launch.
  absl::flat_hash_map<int64_t, uint32_t> ops_by_external_id;
  std::vector<Collective> collectives;
  absl::flat_hash_map<std::pair<int64_t, int64_t>, std::string> thread_names;  // (pid, tid) → name
  int64_t base_time_ns = 0;
  int64_t rank = -1;
  int64_t world_size = -1;
  std::string backend;
  // Events of kinds the converter leaves out (flows, instants, GPU-side annotations...), counted.
  uint64_t skipped_events = 0;
  // Events whose duration was negative (kept with duration 0).
  uint64_t negative_durations = 0;
};

// Parses a trace's JSON text as it arrives, in pieces of any size (a file read or inflated a chunk at a time): whole
// events are read into the records a window at a time (trace_json_splitter.h), so what is held is the records and a
// window of a few MiB, never the text nor a parse of all of it. Errors name what was wrong and, for an event, its
// index; the first error ends the parse.
class KinetoTraceParser {
 public:
  // `expected_bytes`: the text's size when known (0 when not), to size the records once.
  explicit KinetoTraceParser(uint64_t expected_bytes = 0);
  ~KinetoTraceParser();
  KinetoTraceParser(const KinetoTraceParser&) = delete;
  KinetoTraceParser& operator=(const KinetoTraceParser&) = delete;

  absl::Status feed(std::string_view text);
  // After the last piece.
  absl::StatusOr<KinetoTrace> finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Lays the parsed trace out as planes and appends them to `space`.
void build_xspace(KinetoTrace&& trace, tensorflow::profiler::XSpace& space);

// Lays it out as a serialized XSpace, the XSpace build_xspace makes: each plane goes to the wire a batch of events at
// a time as it is built, so the planes are never all held as objects (a few bytes per event instead of a few hundred).
std::string build_xspace_bytes(KinetoTrace&& trace);

// Both phases on a string that is not padded (tests, small traces): copies it once.
absl::StatusOr<tensorflow::profiler::XSpace> convert_kineto_json(std::string_view json);

// The collective as XLA names it ("all-reduce" for allreduce, all_reduce...), or "" when it has no XLA name.
std::string_view xla_collective_name(std::string_view kineto_collective);

}  // namespace podscope::kineto
