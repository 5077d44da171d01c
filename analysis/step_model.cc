#include "analysis/step_model.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "analysis/core_trace.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XPlane;
using xspace::XEventView;
using xspace::XPlaneReader;

// XProf's kTensorShapes: a TF op's input shapes with their types, e.g. "(half[4,384];half[])".
constexpr std::string_view kTensorShapesStat = "shape";
constexpr std::string_view kBytesAccessedStat = "bytes_accessed";
constexpr std::string_view kCorrelationIdStat = "correlation_id";

constexpr std::string_view kDroppedAtWindowEdge = "partial: cut by the capture window's edge";
constexpr std::string_view kDroppedNoDeviceWork = "no device work in the step";
constexpr std::string_view kDroppedMissingOnCore = "missing on some core";

bool event_has_stat(const XEvent& event, std::optional<int64_t> stat_id) {
  if (!stat_id) return false;
  for (const auto& stat : event.stats()) {
    if (stat.metadata_id() == *stat_id) return true;
  }
  return false;
}

// Self time of nested events on one line: each event's time minus the part of it its children take. Events
// arrive by start; `self_of(slot)` is where an event's self time is summed.
class NestingTracker {
 public:
  // Call for every event of interest, in start order; returns nothing, subtracts from the enclosing event.
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

// Running input-op totals by name.
class InputOpTable {
 public:
  size_t slot(std::string_view name, InputCategory category) {
    auto [it, inserted] = index_.try_emplace(std::string(name), totals_.size());
    if (inserted) totals_.push_back({std::string(name), category});
    return it->second;
  }
  InputOpTotal& at(size_t slot) { return totals_[slot]; }
  std::vector<InputOpTotal> take() && { return std::move(totals_); }

 private:
  absl::flat_hash_map<std::string, size_t> index_;
  std::vector<InputOpTotal> totals_;
};

void merge_input_ops(std::vector<InputOpTotal>& into, std::vector<InputOpTotal> from) {
  for (auto& op : from) {
    auto it = std::find_if(into.begin(), into.end(), [&](const InputOpTotal& o) { return o.name == op.name; });
    if (it == into.end()) {
      into.push_back(std::move(op));
      continue;
    }
    it->count += op.count;
    it->time_ns += op.time_ns;
    it->self_ns += op.self_ns;
  }
}

// An annotated stage as read: its totals per stage id (its name a view into the plane being read).
struct StageTotals {
  std::string_view name;
  InputCategory category = InputCategory::kUnclassified;
  uint64_t count = 0;
  int64_t time_ns = 0;
};

// The Input Pipeline line, event by event: stage totals (self time = time − children's time, by the parent links)
// and the root stages as waits for input. A client gives each call a stage id of its own, so the ids are as many
// as the calls: hashed while read, put in id order once.
class InputStageLineReader {
 public:
  explicit InputStageLineReader(const XPlaneReader& plane)
      : id_stat_(plane.stat_id(xspace::kInputStageIdStat)),
        parent_stat_(plane.stat_id(xspace::kInputStageParentIdStat)),
        category_stat_(plane.stat_id(xspace::kInputStageCategoryStat)) {}

  void add(const XEventView& e, std::vector<TypedInterval>& events) {
    const int64_t id = e.int_stat(id_stat_).value_or(0);
    const int64_t parent = e.int_stat(parent_stat_).value_or(0);
    StageTotals& totals = by_id_[id];
    if (totals.count == 0) {
      totals.name = e.name();
      totals.category = stage_input_category(e.str_stat(category_stat_).value_or(""));
    }
    ++totals.count;
    totals.time_ns += e.end_ns() - e.start_ns();
    if (parent != 0 && parent != id) {
      children_ns_[parent] += e.end_ns() - e.start_ns();
    } else if (e.end_ns() > e.start_ns()) {
      events.push_back({e.start_ns(), e.end_ns(), EventType::kHostWaitInput});
    }
  }

  std::vector<InputOpTotal> take() && {
    std::vector<std::pair<int64_t, const StageTotals*>> by_id;
    by_id.reserve(by_id_.size());
    for (const auto& [id, totals] : by_id_) by_id.emplace_back(id, &totals);
    std::sort(by_id.begin(), by_id.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<InputOpTotal> stages;
    for (const auto& [id, totals] : by_id) {
      const auto children = children_ns_.find(id);
      const int64_t self =
          std::max<int64_t>(0, totals->time_ns - (children == children_ns_.end() ? 0 : children->second));
      const std::string_view name = totals->name;  // a lambda may not capture a structured binding before C++23
      auto it = std::find_if(stages.begin(), stages.end(), [name](const InputOpTotal& s) { return s.name == name; });
      if (it == stages.end()) it = stages.insert(stages.end(), {std::string(totals->name), totals->category});
      it->count += totals->count;
      it->time_ns += totals->time_ns;
      it->self_ns += self;
    }
    return stages;
  }

 private:
  const std::optional<int64_t> id_stat_;
  const std::optional<int64_t> parent_stat_;
  const std::optional<int64_t> category_stat_;
  absl::flat_hash_map<int64_t, StageTotals> by_id_;
  absl::flat_hash_map<int64_t, int64_t> children_ns_;
};

// Per event metadata id of a device plane: the op's kind and type (decided once per name) and its totals.
struct DeviceOpEntry {
  OpKind kind = OpKind::kLowFlopsCompute;
  EventType type = EventType::kDeviceCompute32;
  size_t slot = 0;  // into CoreSteps::ops
  // The op's metadata stats, which count for every event without its own.
  const tensorflow::profiler::XStat* flops = nullptr;
  const tensorflow::profiler::XStat* bytes_accessed = nullptr;
  const tensorflow::profiler::XStat* tensor_shapes = nullptr;
};

// The ids of the stats a device op's event is read for; an absent stat gets an id no stat has.
struct DeviceOpStatIds {
  static constexpr int64_t kAbsent = std::numeric_limits<int64_t>::min();
  int64_t flops = kAbsent;
  int64_t bytes_accessed = kAbsent;
  int64_t tensor_shapes = kAbsent;
  int64_t group_id = kAbsent;
};

// The first stat of `stats` with id `id`.
const tensorflow::profiler::XStat* find_stat(
    const google::protobuf::RepeatedPtrField<tensorflow::profiler::XStat>& stats, int64_t id) {
  if (id == DeviceOpStatIds::kAbsent) return nullptr;
  for (const auto& stat : stats) {
    if (stat.metadata_id() == id) return &stat;
  }
  return nullptr;
}

// Breaks a core's typed events down into its steps, and notes the gaps where nothing ran.
void break_down_core(std::vector<TypedInterval>& events, const std::vector<StepSpan>& steps, CoreSteps& core) {
  std::vector<TimeSpan> windows;
  windows.reserve(steps.size());
  for (const StepSpan& s : steps) windows.push_back({s.start_ns, s.end_ns});
  std::vector<TypedInterval> host_side;
  for (const TypedInterval& e : events) {
    if (!is_device_event_type(e.type)) host_side.push_back(e);
  }
  const std::vector<EventTypeDurations> by_type = break_down_by_type(events, windows, nullptr, &core.idle_gaps);
  std::vector<int64_t> host_busy;
  break_down_by_type(host_side, windows, &host_busy);
  core.steps.clear();
  for (size_t i = 0; i < steps.size(); ++i) {
    StepTime step{steps[i].step_num, steps[i].start_ns, steps[i].end_ns, by_type[i]};
    for (int t = 0; t < kEventTypeCount; ++t) {
      if (is_device_event_type(static_cast<EventType>(t))) step.device_busy_ns += by_type[i][t];
    }
    step.host_busy_ns = host_busy[i];
    core.steps.push_back(step);
  }
}

// The largest `batch_size` stat on the plane's Steps line.
int64_t read_batch_size(const XPlaneReader& plane) {
  if (!plane.stat_id(xspace::kBatchSizeStat)) return 0;
  int64_t batch_size = 0;
  for (const auto& line : plane.proto().lines()) {
    if (line.name() != xspace::kStepsLineName) continue;
    plane.for_each_event(line, [&](const XEventView& e) {
      batch_size = std::max(batch_size, e.int_stat(xspace::kBatchSizeStat).value_or(0));
    });
  }
  return batch_size;
}

// Host activity from other planes (disjoint segments by priority) fills the device's idle gaps (device events win
// over host events; within the gaps, host events by their priorities); host busy time counts host activity of both.
void fill_gaps_with_host_activity(CoreSteps& core, const std::vector<TypedInterval>& host_segments) {
  if (host_segments.empty() || core.steps.empty()) return;
  const std::vector<EventTypeDurations> in_gaps = distribute_segments(host_segments, core.idle_gaps);
  size_t step = 0;
  for (size_t g = 0; g < core.idle_gaps.size(); ++g) {
    while (step < core.steps.size() && core.steps[step].end_ns <= core.idle_gaps[g].start_ns) ++step;
    if (step == core.steps.size()) break;
    StepTime& s = core.steps[step];
    for (int t = 1; t < kEventTypeCount; ++t) {
      s.type_ns[t] += in_gaps[g][t];
      s.type_ns[0] -= in_gaps[g][t];
    }
  }
  std::vector<TimeSpan> windows;
  windows.reserve(core.steps.size());
  for (const StepTime& s : core.steps) windows.push_back({s.start_ns, s.end_ns});
  std::vector<int64_t> busy;
  distribute_segments(host_segments, windows, &busy);
  for (size_t i = 0; i < core.steps.size(); ++i) {
    core.steps[i].host_busy_ns = std::max(core.steps[i].host_busy_ns, busy[i]);
  }
}

// Reads one device plane in one walk over its lines: its input stages, and each op typed (XProf's event types),
// summed per op and kept as an interval for the breakdown, its step noted (the plane's own steps).
class CoreStepReader final : public PlaneEventReader {
 public:
  CoreStepReader(const XPlaneReader& plane, PlaneKind kind) : plane_(plane), kind_(kind), own_steps_(plane_) {
    core_.plane_id = plane.proto().id();
    core_.plane_name = plane.proto().name();
    core_.kind = kind;
    if (auto host = plane_.str_stat(xspace::kHostNameStat)) core_.host_name = std::string(*host);
    core_.capability = read_device_capability(plane_);
    core_.batch_size = read_batch_size(plane_);
    ids_.flops = plane_.stat_id(xspace::kFlopsStat).value_or(DeviceOpStatIds::kAbsent);
    ids_.bytes_accessed = plane_.stat_id(kBytesAccessedStat).value_or(DeviceOpStatIds::kAbsent);
    ids_.tensor_shapes = plane_.stat_id(kTensorShapesStat).value_or(DeviceOpStatIds::kAbsent);
    ids_.group_id = own_steps_.group_id_stat().value_or(DeviceOpStatIds::kAbsent);
  }

  bool reads_line(const tensorflow::profiler::XLine& line) const override {
    return is_input_line(line) || is_op_line(kind_, line.name());
  }
  void begin_line(const tensorflow::profiler::XLine& line) override {
    if (is_input_line(line)) {
      input_stages_.emplace(plane_);
      return;
    }
    nesting_ = NestingTracker();
    events_.reserve(events_.size() + static_cast<size_t>(line.events_size()));
  }
  void add_event(const XEventView& e) override {
    if (input_stages_) {
      input_stages_->add(e, events_);
    } else {
      add_op(e, nesting_);
    }
  }
  void end_line(const tensorflow::profiler::XLine&) override {
    if (!input_stages_) return;
    for (auto& stage : std::move(*input_stages_).take()) core_.input_stages.push_back(std::move(stage));
    input_stages_.reset();
  }

  // The plane's steps broken down; a plane without steps of its own keeps its events for its file's markers.
  CoreSteps finish() && {
    core_.source = own_steps_.source();
    std::vector<StepSpan> steps = std::move(own_steps_).take_steps();
    if (steps.empty()) {
      core_.unstepped = std::move(events_);
    } else {
      break_down_core(events_, steps, core_);
    }
    return std::move(core_);
  }

 private:
  // The stats an op's event is read for: its own, else its op's (metadata), in one pass over its stats.
  struct OpStats {
    const tensorflow::profiler::XStat* flops = nullptr;
    const tensorflow::profiler::XStat* bytes_accessed = nullptr;
    const tensorflow::profiler::XStat* tensor_shapes = nullptr;
    const tensorflow::profiler::XStat* group = nullptr;
  };

  bool is_input_line(const tensorflow::profiler::XLine& line) const {
    return kind_ == PlaneKind::kCustom && line.name() == xspace::kInputPipelineLineName;
  }

  void add_op(const XEventView& e, NestingTracker& nesting) {
    ++core_.event_count;
    auto [it, created] = entries_.try_emplace(e.proto().metadata_id());
    DeviceOpEntry& entry = it->second;
    if (created) read_metadata_stats(e, entry);
    const OpStats stats = op_stats(e, entry);
    const double flops_value = stats.flops ? xspace::stat_as_double(*stats.flops).value_or(0) : 0;
    if (created) {
      entry.kind = classify_op(e.name(), e.line().name(), flops_value > 0);
      entry.type = device_event_type(entry.kind, e.name(), "");
      entry.slot = core_.ops.size();
      core_.ops.push_back({std::string(e.name()), entry.kind});
    }
    EventType type = entry.type;
    if (stats.tensor_shapes && (type == EventType::kDeviceCompute32 || type == EventType::kDeviceCompute16)) {
      if (auto shapes = plane_.str_of(stats.tensor_shapes)) type = device_event_type(entry.kind, e.name(), *shapes);
    }
    const int64_t start = e.start_ns();
    const int64_t end = e.end_ns();
    events_.push_back({start, end, type});
    DeviceOpTotal& total = core_.ops[entry.slot];
    ++total.occurrences;
    total.self_ns += end - start;
    total.flops += flops_value;
    if (stats.bytes_accessed) total.bytes_accessed += xspace::stat_as_double(*stats.bytes_accessed).value_or(0);
    nesting.add(start, end, entry.slot, [&](size_t slot) -> int64_t& { return core_.ops[slot].self_ns; });
    if (stats.group) own_steps_.add_op(start, end, xspace::stat_as_int(*stats.group));
  }

  void read_metadata_stats(const XEventView& e, DeviceOpEntry& entry) const {
    if (const auto* metadata = plane_.event_metadata(e.proto().metadata_id())) {
      entry.flops = find_stat(metadata->stats(), ids_.flops);
      entry.bytes_accessed = find_stat(metadata->stats(), ids_.bytes_accessed);
      entry.tensor_shapes = find_stat(metadata->stats(), ids_.tensor_shapes);
    }
  }

  OpStats op_stats(const XEventView& e, const DeviceOpEntry& entry) const {
    OpStats stats;
    for (const auto& stat : e.proto().stats()) {
      const int64_t id = stat.metadata_id();
      if (id == ids_.flops && !stats.flops) stats.flops = &stat;
      else if (id == ids_.bytes_accessed && !stats.bytes_accessed) stats.bytes_accessed = &stat;
      else if (id == ids_.tensor_shapes && !stats.tensor_shapes) stats.tensor_shapes = &stat;
      else if (id == ids_.group_id && !stats.group) stats.group = &stat;
    }
    if (!stats.flops) stats.flops = entry.flops;
    if (!stats.bytes_accessed) stats.bytes_accessed = entry.bytes_accessed;
    if (!stats.tensor_shapes) stats.tensor_shapes = entry.tensor_shapes;
    return stats;
  }

  const XPlaneReader& plane_;
  const PlaneKind kind_;
  CoreSteps core_;
  DeviceStepSpans own_steps_;
  DeviceOpStatIds ids_;
  std::vector<TypedInterval> events_;
  NestingTracker nesting_;                            // of the op line being read
  std::optional<InputStageLineReader> input_stages_;  // while the Input Pipeline line is read
  absl::flat_hash_map<int64_t, DeviceOpEntry> entries_;
};

}  // namespace

std::string_view input_category_name(InputCategory category) {
  switch (category) {
    case InputCategory::kEnqueue: return "Enqueue";
    case InputCategory::kDemandedFileRead: return "Demanded file read";
    case InputCategory::kAdvancedFileRead: return "Advanced file read";
    case InputCategory::kPreprocessing: return "Preprocessing";
    case InputCategory::kUnclassified: return "Unknown";
  }
  return "Unknown";
}

std::optional<InputCategory> host_input_category(std::string_view name) {
  if (name.starts_with("InfeedEnqueue") || name.find("MemcpyH2D") != std::string_view::npos) {
    return InputCategory::kEnqueue;
  }
  if (name.starts_with("IteratorGetNext") || name.starts_with(xspace::kTorchDataLoaderPrefix)) {
    return InputCategory::kUnclassified;
  }
  if (!name.starts_with("Iterator::")) return std::nullopt;
  const size_t last = name.rfind("::");
  const std::string_view leaf = name.substr(last + 2);
  constexpr std::string_view kFileSources[] = {"TFRecord", "TextLine", "FixedLengthRecord", "SSTable", "RecordIO"};
  for (const auto source : kFileSources) {
    if (leaf.ends_with(source)) {
      return name.find("::Prefetch") != std::string_view::npos ? InputCategory::kAdvancedFileRead
                                                               : InputCategory::kDemandedFileRead;
    }
  }
  return InputCategory::kPreprocessing;
}

InputCategory stage_input_category(std::string_view stage_category) {
  if (stage_category == xspace::kInputStageCategories[0]) return InputCategory::kDemandedFileRead;
  if (stage_category == xspace::kInputStageCategories[1]) return InputCategory::kPreprocessing;
  if (stage_category == xspace::kInputStageCategories[2]) return InputCategory::kEnqueue;
  return InputCategory::kUnclassified;
}

DeviceCapability read_device_capability(const XPlaneReader& plane) {
  DeviceCapability c;
  c.clock_rate_khz = plane.double_stat("clock_rate").value_or(0);
  c.core_count = plane.int_stat(xspace::kCoreCountStat).value_or(0);
  c.memory_bandwidth_bytes_per_s = plane.double_stat("memory_bandwidth").value_or(0);
  c.compute_cap_major = static_cast<int>(plane.int_stat("compute_cap_major").value_or(0));
  c.compute_cap_minor = static_cast<int>(plane.int_stat("compute_cap_minor").value_or(0));
  return c;
}

double DeviceCapability::peak_flops_per_s() const {
  if (clock_rate_khz <= 0 || core_count <= 0 || compute_cap_major <= 0) return 0;
  // 32-bit FMA units per streaming multiprocessor by compute capability; an FMA is 2 FLOPs.
  int units = 64;
  if (compute_cap_major == 3) units = 192;
  else if (compute_cap_major == 5) units = 128;
  else if (compute_cap_major == 6) units = compute_cap_minor == 0 ? 64 : 128;
  else if (compute_cap_major == 8) units = compute_cap_minor == 0 ? 64 : 128;
  else if (compute_cap_major >= 9) units = 128;
  return 2.0 * units * static_cast<double>(core_count) * clock_rate_khz * 1e3;
}

std::vector<TypedInterval> disjoint_by_priority(std::vector<TypedInterval>& intervals) {
  return analysis::disjoint_by_priority(intervals, &TypedInterval::type, kEventTypesByPriority);
}

std::vector<EventTypeDurations> distribute_segments(const std::vector<TypedInterval>& segments,
                                                    const std::vector<TimeSpan>& windows, std::vector<int64_t>* busy_ns,
                                                    std::vector<TimeSpan>* gaps) {
  std::vector<EventTypeDurations> result =
      distribute_by_kind<kEventTypeCount>(segments, &TypedInterval::type, windows, busy_ns, gaps);
  // Time no segment covers is unknown too.
  for (size_t w = 0; w < windows.size(); ++w) {
    int64_t typed = 0;
    for (int t = 1; t < kEventTypeCount; ++t) typed += result[w][t];
    result[w][0] = windows[w].end_ns - windows[w].start_ns - typed;
  }
  return result;
}

std::vector<EventTypeDurations> break_down_by_type(std::vector<TypedInterval>& intervals,
                                                   const std::vector<TimeSpan>& windows, std::vector<int64_t>* busy_ns,
                                                   std::vector<TimeSpan>* gaps) {
  return distribute_segments(disjoint_by_priority(intervals), windows, busy_ns, gaps);
}

CoreSteps core_steps_from_plane(const XPlane& plane, PlaneKind kind) {
  const XPlaneReader plane_reader(plane);
  CoreStepReader reader(plane_reader, kind);
  PlaneEventReader* readers[] = {&reader};
  walk_plane(plane_reader, readers);
  return std::move(reader).finish();
}

namespace {

bool is_step_marker_name(std::string_view name) {
  return std::any_of(std::begin(xspace::kHostStepMarkerPrefixes), std::end(xspace::kHostStepMarkerPrefixes),
                     [&](std::string_view prefix) { return name.starts_with(prefix); });
}

// A host plane's step work and input ops, in one walk over its lines (counters aside), added to its file's
// `activity` (its input ops when the walk is over: finish()).
class HostActivityReader final : public PlaneEventReader {
 public:
  HostActivityReader(const XPlaneReader& plane, HostActivity& activity)
      : activity_(activity),
        host_cpu_(plane.name() == xspace::kHostPlaneName),
        plane_name_(plane.name()),
        correlation_stat_(plane.stat_id(kCorrelationIdStat)),
        group_stat_(plane.stat_id(xspace::kGroupIdStat)) {}

  bool reads_line(const tensorflow::profiler::XLine& line) const override {
    return line.name() != xspace::kCountersLineName;
  }
  void begin_line(const tensorflow::profiler::XLine&) override { nesting_ = NestingTracker(); }
  void add_event(const XEventView& e) override {
    const int64_t start = e.start_ns();
    const int64_t end = e.end_ns();
    if (end <= start) return;
    const std::string_view name = e.name();
    if (const auto category = host_input_category(name)) {
      const size_t slot = input_ops_.slot(name, *category);
      InputOpTotal& op = input_ops_.at(slot);
      ++op.count;
      op.time_ns += end - start;
      op.self_ns += end - start;
      nesting_.add(start, end, slot, [&](size_t s) -> int64_t& { return input_ops_.at(s).self_ns; });
    }
    const auto type = host_event_type(plane_name_, name, event_has_stat(e.proto(), correlation_stat_),
                                      event_has_stat(e.proto(), group_stat_));
    if (type) {
      activity_.intervals.push_back({start, end, *type});
    } else if (host_cpu_ && !is_step_marker_name(name)) {
      activity_.untyped.push_back({start, end, EventType::kHostCompute});
    }
  }

  void finish() && { merge_input_ops(activity_.input_ops, std::move(input_ops_).take()); }

 private:
  HostActivity& activity_;
  const bool host_cpu_;
  const std::string_view plane_name_;
  const std::optional<int64_t> correlation_stat_;
  const std::optional<int64_t> group_stat_;
  InputOpTable input_ops_;
  NestingTracker nesting_;
};

}  // namespace

void add_host_activity_from_plane(const XPlane& plane_proto, HostActivity& activity) {
  const XPlaneReader plane(plane_proto);
  HostActivityReader reader(plane, activity);
  PlaneEventReader* readers[] = {&reader};
  walk_plane(plane, readers);
  std::move(reader).finish();
}

bool StepModel::has_steps() const {
  return std::any_of(cores.begin(), cores.end(), [](const ModelCore& c) { return !c.trace.steps.empty(); });
}

StepModelBuilder::FileState& StepModelBuilder::file(size_t file_index) {
  if (files_.size() <= file_index) files_.resize(file_index + 1);
  return files_[file_index];
}

bool StepModelBuilder::wants_line(std::string_view plane_name, std::string_view line_name) {
  if (plane_name == xspace::kHostPlaneName || plane_name == xspace::kCuptiHostPlaneName) {
    return line_name != xspace::kCountersLineName;
  }
  const auto kind = device_plane_kind(plane_name);
  return kind && (line_name == xspace::kStepsLineName || is_op_line(*kind, line_name) ||
                  (*kind == PlaneKind::kCustom && line_name == xspace::kInputPipelineLineName));
}

void StepModelBuilder::add_file_names(size_t file_index, const std::vector<std::string>& hostnames,
                                      std::string_view file_stem) {
  file(file_index).steps.add_file_names(hostnames, file_stem);
}

struct StepModelBuilder::PlaneWalk {
  std::optional<HostStepMarkerReader> markers;
  std::optional<HostActivityReader> host_activity;
  std::optional<CoreStepReader> core;
};

StepModelBuilder::StepModelBuilder() = default;
StepModelBuilder::~StepModelBuilder() = default;

void StepModelBuilder::begin_plane(size_t file_index, const XPlaneReader& plane,
                                   std::vector<PlaneEventReader*>& readers) {
  FileState& state = file(file_index);
  walk_ = std::make_unique<PlaneWalk>();
  if (plane.name() == xspace::kHostPlaneName || plane.name() == xspace::kCuptiHostPlaneName) {
    if (plane.name() == xspace::kHostPlaneName) {
      state.steps.add_host_plane(plane.proto());
      readers.push_back(&walk_->markers.emplace());
    }
    readers.push_back(&walk_->host_activity.emplace(plane, state.host));
    return;
  }
  if (const auto kind = device_plane_kind(plane.name())) readers.push_back(&walk_->core.emplace(plane, *kind));
}

void StepModelBuilder::end_plane(size_t file_index) {
  const std::unique_ptr<PlaneWalk> walk = std::move(walk_);
  if (!walk) return;
  FileState& state = file(file_index);
  if (walk->markers) state.steps.set_host_markers(std::move(*walk->markers).finish());
  if (walk->host_activity) std::move(*walk->host_activity).finish();
  if (walk->core) {
    pending_cores_.emplace_back(file_index, std::move(*walk->core).finish());
    state.steps.add_device_plane_source(pending_cores_.back().second.source);
  }
}

const HostStepMarkers& StepModelBuilder::host_step_markers(size_t file_index) {
  return file(file_index).steps.host_markers();
}

std::vector<TypedInterval> StepModelBuilder::end_file(size_t file_index) {
  FileState& state = file(file_index);
  if (state.ended) return {};
  state.ended = true;
  for (const auto& [core_file, core] : pending_cores_) {
    if (core_file == file_index && core.host_name) state.steps.add_device_plane_host(*core.host_name);
  }
  state.host_name = state.steps.host_name();
  if (add_host_core_when_no_device(file_index, state)) {
    state.host.intervals.insert(state.host.intervals.end(), state.host.untyped.begin(), state.host.untyped.end());
  }
  state.host.untyped = {};
  std::vector<TypedInterval> host_segments = disjoint_by_priority(state.host.intervals);
  state.host.intervals = {};
  for (auto& [core_file, core] : pending_cores_) {
    if (core_file != file_index) continue;
    if (core.plane_name != xspace::kHostPlaneName) ++device_planes_;
    take_steps_from_markers(core, state.steps.markers_for_unstepped_planes());
    if (core.steps.empty()) ++planes_without_steps_;
    fill_gaps_with_host_activity(core, host_segments);
    core.idle_gaps = {};
    drop_partial_and_idle_steps(core, state.steps);
    ModelCore entry;
    entry.file_index = file_index;
    entry.host_name = core.host_name.value_or(state.host_name);
    entry.name = entry.host_name + core.plane_name;
    entry.trace = std::move(core);
    cores_.push_back(std::move(entry));
  }
  std::erase_if(pending_cores_, [&](const auto& pending) { return pending.first == file_index; });
  return host_segments;
}

void StepModelBuilder::take_steps_from_markers(CoreSteps& core, const HostStepMarkers& markers) {
  if (core.steps.empty() && !core.unstepped.empty() && !markers.markers.empty()) {
    MarkerStepSpans by_markers(markers.markers);
    for (const TypedInterval& e : core.unstepped) by_markers.add_op(e.start_ns, e.end_ns);
    const std::vector<StepSpan> steps = std::move(by_markers).take_steps();
    if (!steps.empty()) {
      core.source = markers.source;
      break_down_core(core.unstepped, steps, core);
    }
  }
  core.unstepped = {};
}

void StepModelBuilder::drop_partial_and_idle_steps(CoreSteps& core, const FileSteps& file) {
  // A host core (a CPU-only program's /host:CPU) has no device work to require.
  const bool host_core = core.plane_name == xspace::kHostPlaneName;
  std::erase_if(core.steps, [&](const StepTime& s) {
    const bool cut = file.cut_by_window(s.start_ns, s.end_ns);
    const bool idle_device = !host_core && s.device_busy_ns == 0;
    if (cut) ++dropped_steps_[std::string(kDroppedAtWindowEdge)];
    else if (idle_device) ++dropped_steps_[std::string(kDroppedNoDeviceWork)];
    return cut || idle_device;
  });
}

bool StepModelBuilder::add_host_core_when_no_device(size_t file_index, const FileState& state) {
  const bool has_device = std::any_of(pending_cores_.begin(), pending_cores_.end(),
                                      [&](const auto& pending) { return pending.first == file_index; });
  const HostStepMarkers& markers = state.steps.host_markers();
  if (has_device || markers.markers.empty()) return false;
  // A CPU-only program (TensorFlow or JAX on CPU): the host is its device, its steps are the host step markers and
  // the whole of each step is the host's to explain (fill_gaps_with_host_activity).
  CoreSteps core;
  core.plane_name = std::string(xspace::kHostPlaneName);
  core.host_name = state.host_name;
  core.source = markers.source;
  for (const StepSpan& marker : markers.markers) {
    StepTime step{marker.step_num, marker.start_ns, marker.end_ns};
    step.type_ns[static_cast<int>(EventType::kUnknown)] = step.duration_ns();
    core.steps.push_back(step);
    core.idle_gaps.push_back({marker.start_ns, marker.end_ns});
  }
  pending_cores_.emplace_back(file_index, std::move(core));
  return true;
}

StepModel StepModelBuilder::finish() && {
  for (size_t i = 0; i < files_.size(); ++i) end_file(i);
  StepModel model;
  for (FileState& state : files_) {
    model.host_names.push_back(std::move(state.host_name));
    model.host_input_ops.push_back(std::move(state.host.input_ops));
  }
  // Files ended out of order (one that broke part way ends here) still give the cores in file then plane order.
  std::stable_sort(cores_.begin(), cores_.end(),
                   [](const ModelCore& a, const ModelCore& b) { return a.file_index < b.file_index; });
  model.cores = std::move(cores_);
  model.dropped_steps = std::move(dropped_steps_);
  model.device_planes = device_planes_;
  model.planes_without_steps = planes_without_steps_;
  // A step is kept when every core with steps has it; when no step number is on every core (cores that number
  // their steps independently), each core keeps its own.
  std::map<int64_t, size_t> cores_with_step;
  size_t stepped_cores = 0;
  for (const ModelCore& c : model.cores) {
    if (c.trace.steps.empty()) continue;
    ++stepped_cores;
    for (const StepTime& s : c.trace.steps) ++cores_with_step[s.step_num];
  }
  const bool common_step = std::any_of(cores_with_step.begin(), cores_with_step.end(),
                                       [&](const auto& entry) { return entry.second == stepped_cores; });
  if (common_step) {
    for (ModelCore& c : model.cores) {
      std::erase_if(c.trace.steps, [&](const StepTime& s) {
        const bool missing = cores_with_step[s.step_num] != stepped_cores;
        if (missing) ++model.dropped_steps[std::string(kDroppedMissingOnCore)];
        return missing;
      });
    }
  } else if (stepped_cores > 1) {
    model.notes.push_back("no step number is on every core: each core's steps are kept as numbered");
  }
  return model;
}

StepModel step_model_from_xspaces(const std::vector<const tensorflow::profiler::XSpace*>& spaces) {
  StepModelBuilder builder;
  for (size_t i = 0; i < spaces.size(); ++i) {
    builder.add_file_names(i, {spaces[i]->hostnames().begin(), spaces[i]->hostnames().end()},
                           FileSteps::in_memory_stem(i));
    for (const auto& plane : spaces[i]->planes()) builder.add_plane(i, plane);
    builder.end_file(i);
  }
  return std::move(builder).finish();
}

}  // namespace podscope::analysis
