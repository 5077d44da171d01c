// What a core did over all of its events in its file, for the step database's CoreActivity (step_database.proto):
// the time some op ran, some compute op, some communication op and both at once; a GPU core's streams' idle time by
// why each stream waited, and its launches paired with their runtime calls. The figures Holistic Trace Analysis
// shows (temporal breakdown, communication/computation overlap, idle time breakdown, kernel launch statistics), by
// its definitions, computed once per host while its file is read (docs/analysis.md, "Beside HTA").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/steps/step_breakdown.h"
#include "analysis/steps/step_events.h"
#include "podscope/v1/step_database.pb.h"

namespace podscope::analysis {

// A gap between two events of a stream shorter than this is the launch of the next (HTA's consecutive_kernel_delay,
// 30 in its trace's µs).
inline constexpr int64_t kKernelWaitNs = 30'000;
// A launch that starts its event later than this is delayed (HTA's launch_delay_cutoff), a call longer than this is
// long (HTA's runtime_cutoff).
inline constexpr int64_t kDelayedLaunchNs = 100'000;
inline constexpr int64_t kLongLaunchCallNs = 50'000;

// A kernel, copy or memset on a GPU stream, its kind, and the correlation id of the call that launched it (0: none).
struct StreamEvent {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  OpKind kind = OpKind::kLowFlopsCompute;
  int64_t correlation_id = 0;
};

struct StreamEvents {
  std::string name;
  int64_t stream_id = 0;
  std::vector<StreamEvent> events;  // in the line's order
};

// The runtime calls of a file by correlation id.
using RuntimeCalls = absl::flat_hash_map<int64_t, RuntimeCall>;

// The busy, compute, communication and overlap time of a core's ops (sorted by start), from its first to its last.
podscope::v1::CoreActivity activity_of_ops(const std::vector<OpInterval>& ops);

// A host core's activity from its time line (disjoint typed segments within its kept steps) over its kept steps'
// span: host work is busy, and compute unless it is a wait for input or a copy; collectives are communication.
podscope::v1::CoreActivity activity_of_time_line(const std::vector<TypedInterval>& segments, int64_t first_ns,
                                                 int64_t last_ns);

// A GPU core's activity is its streams' alone (the device's own work: not the host collectives it waits for, which
// the pod view counts as its all-reduce wait): its busy, compute, communication and overlap time, each stream's idle
// time and its launches. Each stream's events are put in start order.
void add_stream_activity(std::vector<StreamEvents>& streams, const RuntimeCalls& calls,
                         podscope::v1::CoreActivity& activity);

}  // namespace podscope::analysis
