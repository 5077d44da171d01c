#include "analysis/steps/step_spans.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <span>

#include "proto/xspace/names.h"

namespace podscope::analysis {
namespace {

using xspace::XEventView;
using xspace::XPlaneReader;

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

// A step event's number: our `step_num`, TF's `group_id`, or a name / `step_name` that is a number.
std::optional<int64_t> step_number(const XEventView& event) {
  if (auto n = event.int_stat(xspace::kStepNumStat)) return n;
  if (auto n = event.int_stat(xspace::kGroupIdStat)) return n;
  if (auto n = parse_int(event.name())) return n;
  if (auto name = event.str_stat(xspace::kStepNameStat)) return parse_int(*name);
  return std::nullopt;
}

bool starts_with_any(std::string_view name, std::span<const std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return name.starts_with(p); });
}

// One host marker as read, before numbering.
using RawMarker = HostStepMarkerReader::Marker;

// Markers by start, nested ones dropped, numbered, overlaps cut.
std::vector<StepSpan> number_markers(std::vector<RawMarker> raw) {
  // Where markers carry step numbers, one without a number before the first numbered one has none to follow: it
  // is a function call (a `train_step` tf.function) whose enclosing `train` Trace began before the capture.
  int64_t first_numbered = INT64_MAX;
  for (const RawMarker& m : raw) {
    if (m.step_num) first_numbered = std::min(first_numbered, m.start_ns);
  }
  if (first_numbered != INT64_MAX) {
    std::erase_if(raw, [&](const RawMarker& m) { return !m.step_num && m.start_ns < first_numbered; });
  }
  // By start, the longer first, so that a marker nested in another (Keras's `train` around a `TraceContext`,
  // say) comes after its parent and is dropped.
  std::sort(raw.begin(), raw.end(), [](const RawMarker& a, const RawMarker& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  std::vector<StepSpan> markers;
  for (const RawMarker& m : raw) {
    if (!markers.empty() && m.end_ns <= markers.back().end_ns) continue;
    const int64_t num = m.step_num ? *m.step_num : (markers.empty() ? 0 : markers.back().step_num + 1);
    markers.push_back({num, m.start_ns, m.end_ns});
  }
  normalize_steps(markers);
  return markers;
}

}  // namespace

std::string no_steps_explanation() {
  return "no steps found: looked for a `Steps` line on device planes (podscope's `Step` annotation writes one), "
         "`group_id` stats on device ops (TensorFlow's step grouping), step markers on /host:CPU (events named "
         "train*, test*, TraceContext or multi_step_on_iterator, numbered by a step_num, iter_num or step_id stat) and "
         "NVTX ranges named train* "
         "or step* (CUDA programs traced by libpodscope_cupti). To add one, annotate each training step with "
         "podscope's `Step` (client library), in a CUDA program wrap it in nvtxRangePushA(\"step\"), or in "
         "TensorFlow run each step inside tf.profiler.experimental.Trace(\"train\", step_num=step, _r=1)";
}

std::optional<PlaneKind> device_plane_kind(std::string_view plane_name) {
  if (plane_name.starts_with(xspace::kCustomPlanePrefix)) return PlaneKind::kCustom;
  if (plane_name.starts_with(xspace::kTpuPlanePrefix)) return PlaneKind::kTpu;
  if (plane_name.starts_with(xspace::kGpuPlanePrefix)) return PlaneKind::kGpu;
  return std::nullopt;
}

void normalize_steps(std::vector<StepSpan>& steps) {
  std::sort(steps.begin(), steps.end(), [](const StepSpan& a, const StepSpan& b) { return a.start_ns < b.start_ns; });
  for (size_t i = 1; i < steps.size(); ++i) {
    steps[i - 1].end_ns = std::min(steps[i - 1].end_ns, steps[i].start_ns);
  }
  std::erase_if(steps, [](const StepSpan& s) { return s.end_ns <= s.start_ns; });
}

std::vector<StepSpan> read_steps_line(const XPlaneReader& plane) {
  std::vector<StepSpan> steps;
  const auto* line = plane.find_line(xspace::kStepsLineName);
  if (line == nullptr) return steps;
  plane.for_each_event(*line, [&](const XEventView& e) {
    const auto num = step_number(e);
    if (num && e.end_ns() > e.start_ns()) steps.push_back({*num, e.start_ns(), e.end_ns()});
  });
  normalize_steps(steps);
  return steps;
}

std::optional<int64_t> step_at(const std::vector<StepSpan>& steps, int64_t time_ns) {
  auto it = std::upper_bound(steps.begin(), steps.end(), time_ns,
                             [](int64_t t, const StepSpan& s) { return t < s.start_ns; });
  if (it == steps.begin()) return std::nullopt;
  --it;
  if (time_ns >= it->end_ns) return std::nullopt;
  return it->step_num;
}

DeviceStepSpans::DeviceStepSpans(const XPlaneReader& plane)
    : steps_line_(read_steps_line(plane)),
      // Group ids number the steps only of planes without a Steps line.
      group_id_stat_(steps_line_.empty() ? plane.stat_id(xspace::kGroupIdStat) : std::nullopt) {}

void DeviceStepSpans::add_op(int64_t start_ns, int64_t end_ns, std::optional<int64_t> group) {
  if (!group || !group_id_stat_) return;
  auto [it, first] = groups_.try_emplace(*group, GroupSpan{start_ns, end_ns});
  if (!first) {
    it->second.start_ns = std::min(it->second.start_ns, start_ns);
    it->second.end_ns = std::max(it->second.end_ns, end_ns);
  }
}

std::optional<int64_t> DeviceStepSpans::step_of(int64_t start_ns, std::optional<int64_t> group) const {
  if (group_id_stat_) return group;
  return step_at(steps_line_, start_ns);
}

StepSource DeviceStepSpans::source() const {
  if (!steps_line_.empty()) return StepSource::kStepsLine;
  return groups_.empty() ? StepSource::kNone : StepSource::kGroupIds;
}

std::vector<StepSpan> DeviceStepSpans::take_steps() && {
  if (!steps_line_.empty()) return std::move(steps_line_);
  std::vector<StepSpan> steps;
  steps.reserve(groups_.size());
  for (const auto& [group, span] : groups_) steps.push_back({group, span.start_ns, span.end_ns});
  normalize_steps(steps);
  return steps;
}

void HostStepMarkerReader::begin_line(const tensorflow::profiler::XLine& line) {
  nvtx_line_ = std::string_view(line.name()).starts_with(xspace::kNvtxLinePrefix);
}

void HostStepMarkerReader::add_event(const XEventView& e) {
  if (e.end_ns() <= e.start_ns()) return;
  if (starts_with_any(e.name(), xspace::kHostStepMarkerPrefixes)) {
    auto num = e.int_stat(xspace::kStepNumStat);
    if (!num) num = e.int_stat(xspace::kIterNumStat);
    if (!num) num = e.int_stat(xspace::kStepIdStat);
    trace_me_.push_back({e.start_ns(), e.end_ns(), num});
  } else if (nvtx_line_ && starts_with_any(e.name(), xspace::kNvtxStepRangePrefixes)) {
    nvtx_.push_back({e.start_ns(), e.end_ns(), std::nullopt});
  }
}

HostStepMarkers HostStepMarkerReader::finish() && {
  if (!trace_me_.empty()) return {StepSource::kHostMarkers, number_markers(std::move(trace_me_))};
  if (!nvtx_.empty()) return {StepSource::kNvtxRanges, number_markers(std::move(nvtx_))};
  return {};
}

HostStepMarkers read_host_step_markers(const tensorflow::profiler::XPlane& host_plane) {
  const XPlaneReader plane(host_plane);
  HostStepMarkerReader reader;
  PlaneEventReader* readers[] = {&reader};
  walk_plane(plane, readers);
  return std::move(reader).finish();
}

std::optional<int64_t> MarkerStepSpans::add_op(int64_t start_ns, int64_t end_ns) {
  auto it = std::upper_bound(markers_.begin(), markers_.end(), start_ns,
                             [](int64_t t, const StepSpan& s) { return t < s.start_ns; });
  if (it == markers_.begin()) return std::nullopt;
  const int64_t step = std::prev(it)->step_num;
  auto [span, first] = steps_.try_emplace(step, StepSpan{step, start_ns, end_ns});
  if (!first) {
    span->second.start_ns = std::min(span->second.start_ns, start_ns);
    span->second.end_ns = std::max(span->second.end_ns, end_ns);
  }
  return step;
}

std::vector<StepSpan> MarkerStepSpans::take_steps() && {
  std::vector<StepSpan> steps;
  steps.reserve(steps_.size());
  for (const auto& [num, span] : steps_) steps.push_back(span);
  normalize_steps(steps);
  return steps;
}

std::string FileSteps::in_memory_stem(size_t file_index) { return "host" + std::to_string(file_index); }

void FileSteps::add_host_plane(const tensorflow::profiler::XPlane& host_plane) {
  const XPlaneReader plane(host_plane);
  if (auto name = plane.str_stat(xspace::kHostNameStat)) host_plane_name_ = std::string(*name);
  capture_start_ns_ = plane.int_stat(xspace::kCaptureStartStat);
  capture_end_ns_ = plane.int_stat(xspace::kCaptureEndStat);
}

void FileSteps::add_file_names(const std::vector<std::string>& hostnames, std::string_view file_stem) {
  if (!hostnames.empty()) xspace_name_ = hostnames.front();
  file_stem_ = std::string(file_stem);
}

void FileSteps::add_device_plane_source(StepSource source) {
  if (source == StepSource::kStepsLine || source == StepSource::kGroupIds) device_steps_seen_ = true;
}

void FileSteps::add_device_plane_host(std::string_view host_name) {
  if (!device_plane_name_) device_plane_name_ = std::string(host_name);
}

std::string FileSteps::host_name() const {
  if (host_plane_name_) return *host_plane_name_;
  if (xspace_name_) return *xspace_name_;
  if (device_plane_name_) return *device_plane_name_;
  return file_stem_;
}

const HostStepMarkers& FileSteps::markers_for_unstepped_planes() const {
  static const HostStepMarkers kNone;
  return device_steps_seen_ ? kNone : markers_;
}

bool FileSteps::cut_by_window(int64_t start_ns, int64_t end_ns) const {
  return (capture_start_ns_ && start_ns <= *capture_start_ns_) || (capture_end_ns_ && end_ns >= *capture_end_ns_);
}

}  // namespace podscope::analysis
