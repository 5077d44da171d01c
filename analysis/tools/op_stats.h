// Framework op statistics (XProf's "TF stats" / framework op stats): per op type and name, on the device side and
// on the host side, its occurrences, total and self time (self = duration − the ops nested in it on the same
// line), its share of its side's time with and without idle, FLOP rate, memory bandwidth, operational intensity
// and what bounds it, into XProf's TfStatsDatabase. Planes are added one at a time; only the per-op totals and
// a few figures per plane are kept.
//
// Which events are ops:
//   device planes   the op lines (op_classifier.h: GPU `Stream #` lines, TPU `XLA Ops`, an annotated core's
//                   lines); the op is the event's `tf_op` / `level 0` / `annotation` stat (`name:Type`), else the
//                   event itself: on an annotated core named by the event with the annotation's op kind as its
//                   type, on GPU/TPU planes named by the event with type "unknown".
//   /host:CPU       events (any line) with a `tf_op` stat, or named as TF names its op kernels' TraceMes
//                   (`name:Type`, `TensorFlow Ops` / `Framework Ops` lines included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/steps/plane_walk.h"
#include "podscope/v1/host_analysis.pb.h"
#include "tensorflow/tf_stats.pb.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

// XProf keeps this many rows per side.
inline constexpr size_t kMaxOpStatsRecordsPerSide = 500;
inline constexpr std::string_view kIdleOpName = "IDLE";

struct FrameworkOp {
  std::string_view name;
  std::string_view type;
};

// A TF op full name `name:Type`: the op's name (letters, digits and `_./->`, no spaces) and its type (an
// identifier). Nullopt for anything else (`ExecutorState::Process`, `Iterator::Prefetch`, `MemoryAllocation`).
std::optional<FrameworkOp> parse_tf_op_fullname(std::string_view text);

// Events that could not be used as they are, each counted and none fatal.
struct OpStatsWarnings {
  uint64_t negative_durations = 0;  // events left out
  // An op stat that is not `name:Type` (an empty name or type, a type that is no identifier): its time counts
  // under the stat's whole text, type "unknown".
  uint64_t malformed_op_stats = 0;
  // GPU/TPU events without an op stat: their time counts under the event's name, type "unknown".
  uint64_t device_events_without_op = 0;
  // GPU/TPU events with one: where there are none, the program runs no framework (a bare CUDA program) and each
  // kernel is its own op, which is no warning.
  uint64_t device_events_with_op = 0;
};

// What one plane's ops add up to.
struct PlaneOpTime {
  std::string plane;
  bool device = true;
  uint64_t events = 0;
  int64_t self_ns = 0;  // the self times of its op events summed
  int64_t busy_ns = 0;  // the union of its op events' spans
  int64_t span_ns = 0;  // from the first op's start to the last op's end; idle = span − busy
};

struct OpStatsResult {
  tensorflow::profiler::TfStatsDatabase db;
  OpStatsWarnings warnings;
  std::vector<PlaneOpTime> planes;  // in the order added
  int64_t device_self_ns = 0;
  int64_t host_self_ns = 0;
  int64_t device_idle_ns = 0;
  int64_t host_idle_ns = 0;
  // The device's peaks, from the first device plane that states them (0: unknown).
  double peak_flops_per_s = 0;
  double peak_memory_bytes_per_s = 0;
};

class OpStatsBuilder final : public PlaneConsumer {
 public:
  OpStatsBuilder();
  ~OpStatsBuilder() override;
  // Device planes' op lines and every line of /host:CPU.
  static bool wants_line(std::string_view plane_name, std::string_view line_name);

  // A plane, in a walk shared with other tools (plane_walk.h), or alone.
  void begin_plane(size_t file_index, const xspace::XPlaneReader& plane,
                   std::vector<PlaneEventReader*>& readers) override;
  void end_plane(size_t file_index) override;
  void add_plane(const tensorflow::profiler::XPlane& plane) { read_plane_alone(*this, 0, plane); }

  // One host's file as a part of the pod's op stats: every op's totals, each plane's sums, the counts, the peaks.
  podscope::v1::OpStatsPart take_part() &&;
  // A host's part: its ops summed into the same ops of the other hosts', its planes after theirs.
  void add_part(size_t host_index, const podscope::v1::OpStatsPart& part);

  // The rows per side sorted by self time (longest first, then type and name), at most `max_records_per_side`
  // per side (the cut ones counted in the database); ranks run over the device rows, then the host rows.
  OpStatsResult finish(size_t max_records_per_side = kMaxOpStatsRecordsPerSide) &&;

 private:
  struct OpTotals {
    bool device = true;
    std::string type;
    std::string name;
    uint64_t occurrences = 0;
    int64_t total_ns = 0;
    int64_t self_ns = 0;
    double flops = 0;
    double bytes = 0;
    int64_t tensor_core_ns = 0;
  };
  // An op stat's text, read once: the op it names and whether it was malformed.
  struct StatOp {
    size_t slot = 0;
    bool malformed = false;
  };
  class PlanePass;
  // finish()'s phases: each side's self and idle time, an IDLE row per side (returns the first one's index), the
  // rows in rank order (device first, longest first), both tables with their fractions and cuts.
  void sum_sides(OpStatsResult& result) const;
  size_t add_idle_rows(const OpStatsResult& result);
  std::vector<size_t> rank_order() const;
  void fill_tables(OpStatsResult& result, size_t first_idle, size_t max_records_per_side) const;
  void add_record(tensorflow::profiler::TfStatsTable& table, const OpTotals& op, bool idle_row, double fraction,
                  double& cumulative) const;

  size_t slot_of(bool device, std::string_view type, std::string_view name);
  // `text` of a TF op stat (`name:Type`, an annotation), or, when `framework`, of a `framework_op` stat.
  const StatOp& stat_op(bool device, std::string_view text, bool framework);
  void read_peaks(const tensorflow::profiler::XPlane& plane);

  std::unique_ptr<PlanePass> pass_;  // of the plane being walked
  std::vector<OpTotals> ops_;
  absl::flat_hash_map<std::string, size_t> slots_;  // side, type and name → ops_
  absl::flat_hash_map<std::string, StatOp> device_stat_ops_;
  absl::flat_hash_map<std::string, StatOp> host_stat_ops_;
  absl::flat_hash_map<std::string, StatOp> framework_stat_ops_[2];  // [device]
  std::vector<PlaneOpTime> planes_;
  OpStatsWarnings warnings_;
  std::string device_type_;
  double peak_flops_per_s_ = 0;
  double peak_memory_bytes_per_s_ = 0;
};

// The op stats of one XSpace (every plane of it).
OpStatsResult xspace_to_op_stats(const tensorflow::profiler::XSpace& space);

}  // namespace podscope::analysis
