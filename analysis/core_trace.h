// What the pod analysis keeps of one device plane: its per-step breakdown and the few events that must
// be matched across cores (collectives, channel endpoints), plus per-op totals. The plane itself can be
// dropped afterwards, which is what lets the analysis stream through large captures.
// Times here are in the clock of the host that wrote the plane; the pod analyzer merges clocks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/op_classifier.h"
#include "analysis/step_breakdown.h"
#include "proto/xspace/xplane_reader.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

// One occurrence of a collective on one core.
struct CollectiveInstance {
  int64_t step_num = 0;
  // Identifies the same collective on every participating core within a step: its all_reduce_id, or
  // else its name (NCCL kernels: "nccl") and replica group with its order among those within the step.
  std::string match_key;
  std::string name;
  int64_t duration_ns = 0;
  uint64_t bytes = 0;
  std::string replica_group;
};

// A send (on the source core) or recv-done (on the destination core) with a channel id.
struct ChannelEndpoint {
  bool is_send = false;
  int64_t step_num = 0;
  int64_t channel_id = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  std::string name;
  std::optional<int64_t> src_core;
  std::optional<int64_t> dst_core;
};

struct OpTotal {
  std::string name;
  OpKind kind = OpKind::kLowFlopsCompute;
  uint64_t occurrences = 0;
  int64_t total_ns = 0;
};

struct CoreTrace {
  int64_t plane_id = 0;
  std::string plane_name;
  PlaneKind kind = PlaneKind::kCustom;
  std::optional<std::string> host_name;  // the plane's own host_name stat, if any
  std::optional<int64_t> rank;           // the plane's own rank stat, if any
  std::vector<StepBreakdown> steps;      // sorted by start
  std::vector<CollectiveInstance> collectives;
  std::vector<ChannelEndpoint> channel_endpoints;
  std::vector<OpTotal> op_totals;
  uint64_t event_count = 0;
};

// The kind of a device plane by its name, or nullopt for planes that are not device planes.
std::optional<PlaneKind> device_plane_kind(std::string_view plane_name);

// The steps of a device plane's Steps line, numbered by `step_num`, `group_id`, or a name / `step_name` that
// is a number; normalized (normalize_steps).
std::vector<StepSpan> read_steps_line(const xspace::XPlaneReader& plane);

// Sorts steps by start and cuts overlapping ones at the start of the next (overlapping step events would
// count the same time twice); drops empty ones.
void normalize_steps(std::vector<StepSpan>& steps);

// The host step markers of a `/host:CPU` plane (events on any of its lines whose name starts with
// `train`, `test` or `TraceContext`), numbered by their `step_num`, `iter_num` or `step_id` stat; a
// marker without one is numbered one past the marker before it (the first: 0). Sorted by start; a marker
// nested inside another is dropped, overlapping ones are cut at the start of the next.
std::vector<StepSpan> read_host_step_markers(const tensorflow::profiler::XPlane& host_plane);

// The channel endpoint an op of kind `kind` in step `step_num` is, if it is one: a send or recv-done
// (XLA spelling, ".N" suffix allowed) with a channel id.
std::optional<ChannelEndpoint> channel_endpoint(const xspace::XEventView& event, OpKind kind, int64_t step_num);

// Tells, event by event, which events of a device plane are channel endpoints and of which step, as
// trace_core identifies them (by `step_num`, `group_id` or the plane's Steps line; steps from host
// markers are not known here), for writers that stream a plane without tracing it.
class ChannelEndpointFinder {
 public:
  ChannelEndpointFinder(const tensorflow::profiler::XPlane& plane, PlaneKind kind);
  std::optional<ChannelEndpoint> find(const xspace::XEventView& event) const;

 private:
  xspace::XPlaneReader reader_;
  PlaneKind kind_;
  std::vector<StepSpan> steps_;
  std::optional<int64_t> group_id_stat_;
};

// Reads one device plane: its steps, its ops (classified), and their breakdown. Steps come from the
// Steps line; a plane without one (raw TF/JAX device planes) gets a step per `group_id` of its ops,
// spanning from the first to the last op of the group, numbered by the group id. When its ops carry no
// group id either, the same file's `host_step_markers` make the steps: each op belongs to the last
// marker that started at or before it (the device runs behind the host that launched its work), and a
// step spans from its first op to its last.
CoreTrace trace_core(const tensorflow::profiler::XPlane& plane, PlaneKind kind,
                     const std::vector<StepSpan>& host_step_markers = {});

}  // namespace podscope::analysis
