// Channel endpoints: which events of a device plane are sends and recv-dones with a channel id, and of which step.
// The step database keeps them per core (step_database.h); the trace writers find them while they stream a plane.
// Times here are in the clock of the host that wrote the plane.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/steps/op_classifier.h"
#include "analysis/steps/step_spans.h"
#include "proto/xspace/xplane_reader.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

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
// the step database identifies them (by `step_num`, else the plane's own steps: its Steps line or `group_id`; steps
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

}  // namespace podscope::analysis
