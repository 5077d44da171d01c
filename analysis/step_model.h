// The step model every step tool (overview page, input pipeline analyzer) reads: per core and per step, the
// step's time broken into event types (event_type.h) by XProf's overlap priorities, with the step numbers the
// program recorded. Built while the planes stream past, one at a time: each device plane yields a CoreSteps
// (its steps already broken down, the gaps where the device did nothing, its op and input-stage totals) and
// each host plane adds to its file's HostActivity (waits for input, kernel launches, host compute, input ops,
// step markers); finish() lets host activity fill the device's idle gaps and decides which steps to keep.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/event_type.h"
#include "analysis/op_classifier.h"
#include "analysis/plane_walk.h"
#include "analysis/priority_sweep.h"
#include "analysis/step_breakdown.h"
#include "analysis/step_spans.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::xspace {
class XPlaneReader;
}  // namespace podscope::xspace

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

// A device op summed over its occurrences on one core.
struct DeviceOpTotal {
  std::string name;
  OpKind kind = OpKind::kLowFlopsCompute;
  uint64_t occurrences = 0;
  int64_t self_ns = 0;
  double flops = 0;           // sum of the `flops` stat
  double bytes_accessed = 0;  // sum of the `bytes_accessed` stat
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

struct StepTime {
  int64_t step_num = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  EventTypeDurations type_ns{};  // sums to end_ns − start_ns; time nothing explains is kUnknown
  int64_t device_busy_ns = 0;    // some device-side event ran
  int64_t host_busy_ns = 0;      // some host-side event ran
  int64_t duration_ns() const { return end_ns - start_ns; }
};

// What one device plane yields.
struct CoreSteps {
  int64_t plane_id = 0;
  std::string plane_name;
  PlaneKind kind = PlaneKind::kCustom;
  std::optional<std::string> host_name;
  StepSource source = StepSource::kNone;
  std::vector<StepTime> steps;  // by start
  // Where no event of the plane ran, within its steps (by start): host activity from other planes fills them.
  std::vector<TimeSpan> idle_gaps;
  // Typed events of a plane without steps of its own, kept until its file's host step markers are known.
  std::vector<TypedInterval> unstepped;
  std::vector<DeviceOpTotal> ops;
  std::vector<InputOpTotal> input_stages;  // the plane's annotated input-pipeline stages
  DeviceCapability capability;
  int64_t batch_size = 0;  // the largest `batch_size` stat of its step events; 0 when none has one
  uint64_t event_count = 0;
};

// Reads one device plane: its own steps (step_spans.h), its typed events broken down per step, its device-op and
// input-stage totals. A plane without steps of its own keeps its events in `unstepped`.
CoreSteps core_steps_from_plane(const tensorflow::profiler::XPlane& plane, PlaneKind kind);

// What a file's host planes (/host:CPU, /host:CUPTI) yield.
struct HostActivity {
  std::vector<TypedInterval> intervals;  // by start
  // Host events of /host:CPU with no type of their own (step markers aside), as HOST_COMPUTE: the work of a
  // CPU-only program's steps, used only when its file has no device plane.
  std::vector<TypedInterval> untyped;
  std::vector<InputOpTotal> input_ops;
};

// Adds a host plane's step work and input ops to its file's activity.
void add_host_activity_from_plane(const tensorflow::profiler::XPlane& plane, HostActivity& activity);

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

// One core of the model with the steps kept.
struct ModelCore {
  size_t file_index = 0;
  std::string host_name;
  std::string name;  // "host/plane"
  CoreSteps trace;
};

struct StepModel {
  std::vector<ModelCore> cores;                   // every device plane, in file then plane order; kept steps only
  std::map<std::string, uint64_t> dropped_steps;  // reason → steps dropped for it
  std::vector<std::string> host_names;            // one per file, in file order
  std::vector<std::vector<InputOpTotal>> host_input_ops;  // per file: tf.data / input ops of its host planes
  uint32_t device_planes = 0;
  uint32_t planes_without_steps = 0;
  std::vector<std::string> notes;
  bool has_steps() const;
};

class StepModelBuilder final : public PlaneConsumer {
 public:
  StepModelBuilder();
  ~StepModelBuilder() override;
  // The lines the model reads: device planes' Steps, op and Input Pipeline lines; host planes' lines except
  // counters.
  static bool wants_line(std::string_view plane_name, std::string_view line_name);
  // A plane, in a walk shared with other tools (plane_walk.h), or alone.
  void begin_plane(size_t file_index, const xspace::XPlaneReader& plane,
                   std::vector<PlaneEventReader*>& readers) override;
  void end_plane(size_t file_index) override;
  void add_plane(size_t file_index, const tensorflow::profiler::XPlane& plane) {
    read_plane_alone(*this, file_index, plane);
  }
  // The XSpace's own `hostnames` and the file's stem, which name the host when its host plane does not.
  void add_file_names(size_t file_index, const std::vector<std::string>& hostnames, std::string_view file_stem);
  // The step markers of the file's /host:CPU plane, until the file ends.
  const HostStepMarkers& host_step_markers(size_t file_index);
  // Every plane of the file was added: its cores take their steps and idle time from its host activity, which is
  // then dropped (so the builder holds one file's host activity at a time). finish() ends files not ended.
  // Returns the file's host work as disjoint typed segments (for the pod viewer's cores of the file).
  std::vector<TypedInterval> end_file(size_t file_index);
  StepModel finish() &&;

 private:
  struct FileState {
    HostActivity host;
    FileSteps steps;
    std::string host_name;  // decided when the file ends
    bool ended = false;
  };
  FileState& file(size_t file_index);
  // A core without steps of its own takes them from its file's markers; its unstepped events are dropped.
  static void take_steps_from_markers(CoreSteps& core, const HostStepMarkers& markers);
  void drop_partial_and_idle_steps(CoreSteps& core, const FileSteps& file);
  // A file with host step markers and no device plane gets one core, its /host:CPU plane (true when added).
  bool add_host_core_when_no_device(size_t file_index, const FileState& state);

  // The readers of the plane being walked (begin_plane to end_plane).
  struct PlaneWalk;

  std::vector<FileState> files_;
  std::unique_ptr<PlaneWalk> walk_;
  std::vector<std::pair<size_t, CoreSteps>> pending_cores_;  // of files not ended yet
  std::vector<ModelCore> cores_;                             // of ended files
  std::map<std::string, uint64_t> dropped_steps_;
  uint32_t device_planes_ = 0;
  uint32_t planes_without_steps_ = 0;
};

// Convenience for callers that hold whole XSpaces (one per host file, in file order).
StepModel step_model_from_xspaces(const std::vector<const tensorflow::profiler::XSpace*>& spaces);

}  // namespace podscope::analysis
