// The pod's merged trace in Perfetto's own protobuf format (pod.perfetto-trace): a stream of TracePackets
// that Perfetto's UI and trace processor load without the JSON importer's limits. Per plane, a process
// track (host and plane) with a thread track per line (and overflow tracks "line (overlap N)" for events
// that overlap without nesting, since begin/end slices must nest per track) and a counter track per
// `_counters_` series; each event is a slice begin/end pair whose begin carries its stats as debug
// annotations; each `_counters_` event a counter value; each send / recv-done channel endpoint a flow
// start / end, its id derived from what identifies the transfer, so the two ends meet without lookahead.
//
// Time: every timestamp is the event's coordinator-clock Unix ns, on the trace's default clock (no
// timestamp_clock_id, so no clock snapshot is needed). Each plane is its own packet sequence with its own
// interned names, so nothing accumulates across planes. Field numbers follow Perfetto's public protos
// (protos/perfetto/trace/), subset in perfetto_fields.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trace_writers/merged_trace.h"
#include "trace_writers/proto_wire.h"
#include "run_directory/streamed_file.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::pod_capture {

struct PerfettoTraceCounts {
  uint64_t slices = 0;
  uint64_t counter_values = 0;
  uint64_t flow_starts = 0;
  uint64_t flow_ends = 0;
};

class PerfettoTraceWriter {
 public:
  explicit PerfettoTraceWriter(run_directory::StreamedFile& out, std::optional<TraceWindow> window = {});

  void add_plane(const PlaneOrigin& origin, const tensorflow::profiler::XPlane& plane);
  // Writes what is buffered (the StreamedFile is the caller's to commit).
  void finish();

  const PerfettoTraceCounts& counts() const { return counts_; }

 private:
  class PlaneWriter;

  run_directory::StreamedFile& out_;
  std::optional<TraceWindow> window_;
  wire::Buffer buffer_;
  uint64_t next_track_uuid_ = 1;
  uint32_t next_sequence_id_ = 1;
  int32_t next_pid_ = 1;
  PerfettoTraceCounts counts_;
};

// The flow id of a channel transfer: the `occurrence`-th transfer (from 0, in the order its core's trace
// lists them, line by line and by start within a line) of
// step `step_num` on channel `channel_id` from core `src_core` to core `dst_core`.
uint64_t channel_flow_id(int64_t step_num, int64_t channel_id, int64_t src_core, int64_t dst_core, uint32_t occurrence);

}  // namespace podscope::pod_capture
