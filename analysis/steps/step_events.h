// The events of the step tools' breakdown: typed intervals (XProf's event types, event_type.h) and their sweep into
// steps by overlap priority, the host planes' step work and input ops, input categories, a GPU's capability. The
// step database (step_database.h) reads planes with these.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/steps/event_type.h"
#include "analysis/steps/op_classifier.h"
#include "analysis/steps/plane_walk.h"
#include "analysis/steps/priority_sweep.h"
#include "proto/xspace/xplane_reader.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

struct TypedInterval {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  EventType type = EventType::kUnknown;
};

// XProf's input-op categories.
enum class InputCategory { kEnqueue, kDemandedFileRead, kAdvancedFileRead, kPreprocessing, kUnclassified };
std::string_view input_category_name(InputCategory category);
// A tf.data / input op on a host plane by its name (InfeedEnqueue*, MemcpyH2D, Iterator::..., IteratorGetNext*),
// or nullopt when it is not an input op. Iterators whose last component is a file source (TFRecord, TextLine,
// FixedLengthRecord, SSTable, RecordIO) read files: ahead of demand under a Prefetch, on demand otherwise.
std::optional<InputCategory> host_input_category(std::string_view op_name);
// An annotated input stage's category stat (read, preprocess, enqueue).
InputCategory stage_input_category(std::string_view stage_category);

// An input op or stage summed over its occurrences.
struct InputOpTotal {
  std::string name;
  InputCategory category = InputCategory::kUnclassified;
  uint64_t count = 0;
  int64_t time_ns = 0;
  int64_t self_ns = 0;  // time minus the time of the ops or stages nested in it
};

// Peak figures of a GPU from its plane's capability stats (TF and CUPTI planes write them).
struct DeviceCapability {
  double clock_rate_khz = 0;
  int64_t core_count = 0;  // streaming multiprocessors
  double memory_bandwidth_bytes_per_s = 0;
  int compute_cap_major = 0;
  int compute_cap_minor = 0;
  // 32-bit FLOP/s at peak (0 when the stats are missing).
  double peak_flops_per_s() const;
};
// The capability stats of a device plane (clock_rate, core_count, memory_bandwidth, compute_cap_major/minor).
DeviceCapability read_device_capability(const xspace::XPlaneReader& plane);

// Self time of nested events on one line: each event's time minus the part of it its children take. Events arrive
// by start; `self_of(slot)` is where an event's self time is summed.
class NestingTracker {
 public:
  template <typename SelfOf>  // int64_t& SelfOf(size_t slot)
  void add(int64_t start_ns, int64_t end_ns, size_t slot, SelfOf&& self_of) {
    while (!open_.empty() && open_.back().end_ns <= start_ns) open_.pop_back();
    if (!open_.empty()) self_of(open_.back().slot) -= std::min(end_ns, open_.back().end_ns) - start_ns;
    open_.push_back({end_ns, slot});
  }

 private:
  struct Open {
    int64_t end_ns;
    size_t slot;
  };
  std::vector<Open> open_;
};

// An annotated core's Input Pipeline line, event by event: stage totals (self time = time − children's time, by the
// parent links) and the root stages as waits for input. A client gives each call a stage id of its own, so the ids
// are as many as the calls: hashed while read, put in id order once.
class InputStageLineReader {
 public:
  explicit InputStageLineReader(const xspace::XPlaneReader& plane);
  // Adds a stage call; a root stage's call is appended to `events` as a wait for input.
  void add(const xspace::XEventView& e, std::vector<TypedInterval>& events);
  // The stages by name, in the order of their first ids.
  std::vector<InputOpTotal> take() &&;

 private:
  struct StageTotals {
    std::string_view name;  // a view into the plane being read
    InputCategory category = InputCategory::kUnclassified;
    uint64_t count = 0;
    int64_t time_ns = 0;
  };
  const std::optional<int64_t> id_stat_;
  const std::optional<int64_t> parent_stat_;
  const std::optional<int64_t> category_stat_;
  absl::flat_hash_map<int64_t, StageTotals> by_id_;
  absl::flat_hash_map<int64_t, int64_t> children_ns_;
};

// A host runtime or driver call with a correlation id (/host:CUPTI): the start of every stream event it launched
// is measured from it; `launch` when it is one of the launch calls (is_launch_call).
struct RuntimeCall {
  int64_t correlation_id = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool launch = false;
};

// Whether a host call by this name launches a kernel, copy or memset (cudaLaunchKernel, cudaLaunchKernelExC,
// cuLaunchKernel*, cudaMemcpyAsync, cudaMemsetAsync).
bool is_launch_call(std::string_view name);

// What a file's host planes (/host:CPU, /host:CUPTI) yield.
struct HostActivity {
  std::vector<TypedInterval> intervals;  // by start
  // Host events of /host:CPU with no type of their own (step markers aside), as HOST_COMPUTE: the work of a
  // CPU-only program's steps, used only when its file has no device plane.
  std::vector<TypedInterval> untyped;
  std::vector<InputOpTotal> input_ops;
  std::vector<RuntimeCall> runtime_calls;  // of /host:CUPTI
};

// A host plane's step work and input ops, in one walk over its lines (counters aside), added to its file's
// `activity` (its input ops once the walk is over: finish()).
class HostActivityReader final : public PlaneEventReader {
 public:
  HostActivityReader(const xspace::XPlaneReader& plane, HostActivity& activity);
  ~HostActivityReader() override;
  bool reads_line(const tensorflow::profiler::XLine& line) const override;
  void begin_line(const tensorflow::profiler::XLine&) override;
  void add_event(const xspace::XEventView& e) override;
  void finish() &&;

 private:
  class InputOpTable;
  HostActivity& activity_;
  const bool host_cpu_;
  const std::string_view plane_name_;
  const std::optional<int64_t> correlation_stat_;
  const std::optional<int64_t> group_stat_;
  std::unique_ptr<InputOpTable> input_ops_;
  NestingTracker nesting_;
};

// The intervals (any order; reordered by start) as disjoint segments by start: at every instant some interval is
// active, the highest-priority type active; adjacent segments of one type merged.
std::vector<TypedInterval> disjoint_by_priority(std::vector<TypedInterval>& intervals);

// Disjoint segments (by start) into the windows (sorted, not overlapping): per window the time of each type, the
// time no segment covers as kUnknown; `busy_ns` and `gaps` as for break_down_by_type.
std::vector<EventTypeDurations> distribute_segments(const std::vector<TypedInterval>& segments,
                                                    const std::vector<TimeSpan>& windows,
                                                    std::vector<int64_t>* busy_ns = nullptr,
                                                    std::vector<TimeSpan>* gaps = nullptr);

// Breaks the windows (sorted, not overlapping) into event types: at every instant the highest-priority type
// active wins, time with none is kUnknown. `busy_ns`, when given, gets per window the time some interval was
// active; `gaps`, when given, the spans inside windows where none was. Intervals in any order (reordered).
std::vector<EventTypeDurations> break_down_by_type(std::vector<TypedInterval>& intervals,
                                                   const std::vector<TimeSpan>& windows,
                                                   std::vector<int64_t>* busy_ns = nullptr,
                                                   std::vector<TimeSpan>* gaps = nullptr);

}  // namespace podscope::analysis
