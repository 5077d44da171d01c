// What the pod analysis keeps of one device plane: its per-step breakdown and the few events that must
// be matched across cores (collectives, channel endpoints), plus per-op totals. The plane itself can be
// dropped afterwards, which is what lets the analysis stream through large captures.
// Times here are in the clock of the host that wrote the plane; the pod analyzer merges clocks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/op_classifier.h"
#include "analysis/plane_walk.h"
#include "analysis/step_breakdown.h"
#include "analysis/step_model.h"
#include "analysis/step_spans.h"
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
  StepSource source = StepSource::kNone;
  std::vector<StepBreakdown> steps;  // sorted by start
  // Within its steps, where no op ran (by start), until its file's host work fills them (fill_idle_with_host_work).
  std::vector<TimeSpan> idle_gaps;
  std::vector<CollectiveInstance> collectives;
  std::vector<ChannelEndpoint> channel_endpoints;
  std::vector<OpTotal> op_totals;
  uint64_t event_count = 0;
};

// The ids of the stats a channel endpoint is read with, looked up once per plane.
struct ChannelStatIds {
  explicit ChannelStatIds(const xspace::XPlaneReader& plane);
  std::optional<int64_t> channel_id;
  std::optional<int64_t> bytes;
  std::optional<int64_t> src_core;
  std::optional<int64_t> dst_core;
};

// The channel endpoint an op of kind `kind` in step `step_num` is, if it is one: a send or recv-done
// (XLA spelling, ".N" suffix allowed) with a channel id.
std::optional<ChannelEndpoint> channel_endpoint(const xspace::XEventView& event, OpKind kind, int64_t step_num,
                                                const ChannelStatIds& stats);

// Tells, event by event, which events of a device plane are channel endpoints and of which step, as
// trace_core identifies them (by `step_num`, else the plane's own steps: its Steps line or `group_id`; steps
// from host markers are not known here), for writers that stream a plane without tracing it.
class ChannelEndpointFinder {
 public:
  ChannelEndpointFinder(const tensorflow::profiler::XPlane& plane, PlaneKind kind);
  std::optional<ChannelEndpoint> find(const xspace::XEventView& event) const;

 private:
  xspace::XPlaneReader reader_;
  PlaneKind kind_;
  DeviceStepSpans steps_;
  ChannelStatIds stats_;
  std::optional<int64_t> step_num_stat_;
  std::optional<int64_t> group_id_stat_;
};

// Reads one device plane in a walk of its op lines (plane_walk.h): its steps (step_spans.h: its own, else the
// file's `host_step_markers` when the caller passes them), its ops (classified), and their breakdown.
class CoreTraceReader : public PlaneEventReader {
 public:
  virtual CoreTrace finish() && = 0;
};
// `plane` lives as long as the reader.
std::unique_ptr<CoreTraceReader> make_core_trace_reader(const xspace::XPlaneReader& plane, PlaneKind kind,
                                                        const HostStepMarkers& host_step_markers = {});
// The same, the plane walked for it alone.
CoreTrace trace_core(const tensorflow::profiler::XPlane& plane, PlaneKind kind,
                     const HostStepMarkers& host_step_markers = {});

// Host work of the core's file (disjoint typed segments by start: the step model's host segments, step_model.h)
// fills the core's idle gaps: each step's kernel launch, host compute and compilation time, as the step model
// attributes them. The gaps are dropped.
void fill_idle_with_host_work(CoreTrace& trace, const std::vector<TypedInterval>& host_segments);

}  // namespace podscope::analysis
