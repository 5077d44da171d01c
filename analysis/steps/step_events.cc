#include "analysis/steps/step_events.h"

#include <algorithm>

#include "proto/xspace/names.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XPlane;
using xspace::XEventView;
using xspace::XPlaneReader;

using xspace::kCorrelationIdStat;

bool event_has_stat(const XEvent& event, std::optional<int64_t> stat_id) {
  if (!stat_id) return false;
  for (const auto& stat : event.stats()) {
    if (stat.metadata_id() == *stat_id) return true;
  }
  return false;
}

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

bool is_step_marker_name(std::string_view name) {
  return std::any_of(std::begin(xspace::kHostStepMarkerPrefixes), std::end(xspace::kHostStepMarkerPrefixes),
                     [&](std::string_view prefix) { return name.starts_with(prefix); });
}

}  // namespace

bool is_launch_call(std::string_view name) {
  return name.starts_with("cudaLaunchKernel") || name.starts_with("cuLaunchKernel") ||
         name.starts_with("cudaMemcpyAsync") || name.starts_with("cudaMemsetAsync");
}

// Running input-op totals by name.
class HostActivityReader::InputOpTable {
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

HostActivityReader::HostActivityReader(const XPlaneReader& plane, HostActivity& activity)
    : activity_(activity),
      host_cpu_(plane.name() == xspace::kHostPlaneName),
      plane_name_(plane.name()),
      correlation_stat_(plane.stat_id(kCorrelationIdStat)),
      group_stat_(plane.stat_id(xspace::kGroupIdStat)),
      input_ops_(std::make_unique<InputOpTable>()) {}

HostActivityReader::~HostActivityReader() = default;

bool HostActivityReader::reads_line(const tensorflow::profiler::XLine& line) const {
  return line.name() != xspace::kCountersLineName;
}

void HostActivityReader::begin_line(const tensorflow::profiler::XLine&) { nesting_ = NestingTracker(); }

void HostActivityReader::add_event(const XEventView& e) {
  const int64_t start = e.start_ns();
  const int64_t end = e.end_ns();
  if (end <= start) return;
  const std::string_view name = e.name();
  if (const auto category = host_input_category(name)) {
    const size_t slot = input_ops_->slot(name, *category);
    InputOpTotal& op = input_ops_->at(slot);
    ++op.count;
    op.time_ns += end - start;
    op.self_ns += end - start;
    nesting_.add(start, end, slot, [&](size_t s) -> int64_t& { return input_ops_->at(s).self_ns; });
  }
  const std::optional<int64_t> correlation = e.int_stat(correlation_stat_);
  if (correlation && !host_cpu_) activity_.runtime_calls.push_back({*correlation, start, end, is_launch_call(name)});
  const auto type = host_event_type(plane_name_, name, correlation.has_value(), event_has_stat(e.proto(), group_stat_));
  if (type) {
    activity_.intervals.push_back({start, end, *type});
  } else if (host_cpu_ && !is_step_marker_name(name)) {
    activity_.untyped.push_back({start, end, EventType::kHostCompute});
  }
}

void HostActivityReader::finish() && { merge_input_ops(activity_.input_ops, std::move(*input_ops_).take()); }

InputStageLineReader::InputStageLineReader(const XPlaneReader& plane)
    : id_stat_(plane.stat_id(xspace::kInputStageIdStat)),
      parent_stat_(plane.stat_id(xspace::kInputStageParentIdStat)),
      category_stat_(plane.stat_id(xspace::kInputStageCategoryStat)) {}

void InputStageLineReader::add(const XEventView& e, std::vector<TypedInterval>& events) {
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

std::vector<InputOpTotal> InputStageLineReader::take() && {
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

}  // namespace podscope::analysis
