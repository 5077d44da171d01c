// The tf.data bottleneck analysis: which iterator of an input pipeline holds up its slowest call. Per host from
// TensorFlow's tf.data iterator events (xplane_to_tf_data_stats) or from annotated input-pipeline stages
// (input_stages_to_tf_data_stats); combined over the pod into XProf's CombinedTfDataStats with one bottleneck
// and suggestion per pipeline (combine_tf_data_stats). See docs/analysis.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "analysis/steps/plane_walk.h"
#include "tensorflow/tf_data_stats.pb.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

// A call slower than this is slow (as TensorFlow's tf.data performance guide has it).
inline constexpr int64_t kSlowTfDataCallPs = 50'000'000;
// Each pipeline keeps the iterator trees of its slowest calls only; its latencies count every call.
inline constexpr size_t kSlowestTfDataCallsKept = 10;
// The walk of one call's iterator tree stops at this depth and after visiting this many iterator calls: async
// iterators link to producers on other threads, and real profiles hold trees that never end otherwise.
inline constexpr int kMaxIteratorDepth = 100;
inline constexpr int64_t kMaxIteratorCallsPerWalk = 10'000;

// Calls whose tree walk stopped at a bound (each call counted once per bound); their stats are partial.
struct TfDataWalkCounts {
  uint64_t depth_bound_hits = 0;
  uint64_t call_bound_hits = 0;
};

// The pipelines of one plane.
struct PlaneTfDataStats {
  tensorflow::profiler::TfDataStats stats;
  TfDataWalkCounts walk;
};

// A `/host:CPU` plane written by TensorFlow: one pipeline per root iterator (named Host:0, Host:1... in the
// order of their first calls); the iterator tree of a call by time containment on each line, and through
// Produce/Consume `element_id` links to the producers of async iterators on other lines.
PlaneTfDataStats xplane_to_tf_data_stats(const tensorflow::profiler::XPlane& host_plane);

// The `Input Pipeline` line of an annotated `/device:CUSTOM:<core>` plane: one pipeline per root stage (named
// "<stage> (core N)"); a stage call's children are the calls of its child stages that overlap it.
PlaneTfDataStats input_stages_to_tf_data_stats(const tensorflow::profiler::XPlane& custom_plane);
// The same in a walk of the plane (plane_walk.h); `custom_plane` lives as long as the reader.
class InputStageStatsReader : public PlaneEventReader {
 public:
  virtual PlaneTfDataStats finish() && = 0;
};
std::unique_ptr<InputStageStatsReader> make_input_stage_stats_reader(const xspace::XPlaneReader& custom_plane);

// Whether a plane's event metadata names tf.data iterators: tells, before its lines are read, whether a
// `/host:CPU` plane has anything for xplane_to_tf_data_stats.
bool names_tf_data_iterators(const tensorflow::profiler::XPlane& plane);

struct HostTfDataStats {
  std::string host;
  PlaneTfDataStats plane;
};

// The pod's analysis: pipelines of the same host are merged (iterator ids that collide between planes are
// renumbered), the bottleneck of every host pipeline's slowest call gets a suggestion by its kind, slowest
// pipeline first, and the summary says whether the pod is input-bound (or that no tf.data activity was
// captured, and whether a tree walk hit its bounds).
tensorflow::profiler::CombinedTfDataStats combine_tf_data_stats(std::vector<HostTfDataStats> hosts);

// The terminal page: per host and pipeline its calls, latencies, slow calls, bottleneck and suggestion.
std::string tf_data_stats_to_text(const tensorflow::profiler::CombinedTfDataStats& combined);

}  // namespace podscope::analysis
