#include "analysis/core_trace.h"

#include <algorithm>
#include <charconv>
#include <iterator>

#include "absl/container/flat_hash_map.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

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

}  // namespace

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

void normalize_steps(std::vector<StepSpan>& steps) {
  std::sort(steps.begin(), steps.end(), [](const StepSpan& a, const StepSpan& b) { return a.start_ns < b.start_ns; });
  for (size_t i = 1; i < steps.size(); ++i) {
    steps[i - 1].end_ns = std::min(steps[i - 1].end_ns, steps[i].start_ns);
  }
  std::erase_if(steps, [](const StepSpan& s) { return s.end_ns <= s.start_ns; });
}

namespace {

// The step whose span holds `time_ns`, if any.
std::optional<int64_t> step_at(const std::vector<StepSpan>& steps, int64_t time_ns) {
  auto it = std::upper_bound(steps.begin(), steps.end(), time_ns,
                             [](int64_t t, const StepSpan& s) { return t < s.start_ns; });
  if (it == steps.begin()) return std::nullopt;
  --it;
  if (time_ns >= it->end_ns) return std::nullopt;
  return it->step_num;
}

// Per event metadata id: its class (decided once per name) and its running totals.
struct MetadataEntry {
  OpKind kind = OpKind::kLowFlopsCompute;
  bool needs_flops_check = false;  // custom planes: a `flops` stat can turn low-flops compute into high
  OpTotal total;
};

// MetadataEntry by event metadata id: a plain vector when the plane's ids are dense (they are numbered
// from 1 by every writer we know), a hash map otherwise. It is looked up once per event.
class MetadataTable {
 public:
  explicit MetadataTable(const tensorflow::profiler::XPlane& plane) {
    int64_t max_id = 0;
    for (const auto& [id, md] : plane.event_metadata()) max_id = std::max(max_id, id);
    const auto count = static_cast<int64_t>(plane.event_metadata_size());
    if (max_id < kMaxDenseId && max_id <= 4 * count + 1024) dense_.resize(static_cast<size_t>(max_id) + 1);
  }

  // The entry for `id`; `created` says it was not there before.
  MetadataEntry& get(int64_t id, bool& created) {
    if (id >= 0 && static_cast<size_t>(id) < dense_.size()) {
      auto& slot = dense_[static_cast<size_t>(id)];
      created = !slot.has_value();
      if (created) slot.emplace();
      return *slot;
    }
    auto [it, inserted] = sparse_.try_emplace(id);
    created = inserted;
    return it->second;
  }

  template <typename F>  // F(int64_t id, MetadataEntry&)
  void for_each(F&& f) {
    for (size_t id = 0; id < dense_.size(); ++id) {
      if (dense_[id]) f(static_cast<int64_t>(id), *dense_[id]);
    }
    for (auto& [id, entry] : sparse_) f(id, entry);
  }

 private:
  static constexpr int64_t kMaxDenseId = 1 << 22;
  std::vector<std::optional<MetadataEntry>> dense_;
  absl::flat_hash_map<int64_t, MetadataEntry> sparse_;
};

// A stat on the event itself by stat id (looked up once per plane, not per event).
const tensorflow::profiler::XStat* event_stat(const tensorflow::profiler::XEvent& event, int64_t stat_id) {
  for (const auto& stat : event.stats()) {
    if (stat.metadata_id() == stat_id) return &stat;
  }
  return nullptr;
}

bool has_flops(const tensorflow::profiler::XEvent& event, int64_t flops_stat_id) {
  const auto* stat = event_stat(event, flops_stat_id);
  const auto value = stat ? xspace::stat_as_double(*stat) : std::nullopt;
  return value && *value > 0;
}

// First and last instant of the device ops of one TF/JAX step group.
struct GroupSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

void extend_group(absl::flat_hash_map<int64_t, GroupSpan>& groups, int64_t group, int64_t start, int64_t end) {
  auto [span, first] = groups.try_emplace(group, GroupSpan{start, end});
  if (!first) {
    span->second.start_ns = std::min(span->second.start_ns, start);
    span->second.end_ns = std::max(span->second.end_ns, end);
  }
}

// The step of the last host marker that started at or before `time_ns` (markers sorted by start).
std::optional<int64_t> marker_before(const std::vector<StepSpan>& markers, int64_t time_ns) {
  auto it = std::upper_bound(markers.begin(), markers.end(), time_ns,
                             [](int64_t t, const StepSpan& s) { return t < s.start_ns; });
  if (it == markers.begin()) return std::nullopt;
  return std::prev(it)->step_num;
}

bool is_host_step_marker(std::string_view name) {
  for (const auto prefix : xspace::kHostStepMarkerPrefixes) {
    if (name.starts_with(prefix)) return true;
  }
  return false;
}

// One host marker as read, before numbering.
struct RawMarker {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::optional<int64_t> step_num;
};

}  // namespace

std::optional<PlaneKind> device_plane_kind(std::string_view plane_name) {
  if (plane_name.starts_with(xspace::kCustomPlanePrefix)) return PlaneKind::kCustom;
  if (plane_name.starts_with(xspace::kTpuPlanePrefix)) return PlaneKind::kTpu;
  if (plane_name.starts_with(xspace::kGpuPlanePrefix)) return PlaneKind::kGpu;
  return std::nullopt;
}

std::vector<StepSpan> read_host_step_markers(const tensorflow::profiler::XPlane& host_plane) {
  const XPlaneReader plane(host_plane);
  std::vector<RawMarker> raw;
  for (const auto& line : host_plane.lines()) {
    plane.for_each_event(line, [&](const XEventView& e) {
      if (e.end_ns() <= e.start_ns() || !is_host_step_marker(e.name())) return;
      auto num = e.int_stat(xspace::kStepNumStat);
      if (!num) num = e.int_stat(xspace::kIterNumStat);
      if (!num) num = e.int_stat(xspace::kStepIdStat);
      raw.push_back({e.start_ns(), e.end_ns(), num});
    });
  }
  // Where markers carry step numbers, one without a number before the first numbered one has none to follow: it
  // is a function call (a `train_step` tf.function) whose enclosing `train` Trace began before the capture.
  int64_t first_numbered = INT64_MAX;
  for (const RawMarker& m : raw) {
    if (m.step_num) first_numbered = std::min(first_numbered, m.start_ns);
  }
  if (first_numbered != INT64_MAX) {
    std::erase_if(raw, [&](const RawMarker& m) { return !m.step_num && m.start_ns < first_numbered; });
  }
  // By start, the longer first, so that a marker nested in another (Keras's `train` around a
  // `TraceContext`, say) comes after its parent and is dropped.
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

std::optional<ChannelEndpoint> channel_endpoint(const XEventView& e, OpKind kind, int64_t step_num) {
  // Sends and recv-dones that carry a channel id (async "recv" / "send-done" halves are not endpoints).
  if (kind != OpKind::kSend && kind != OpKind::kRecvDone) return std::nullopt;
  const std::string_view base_name = strip_instance_suffix(e.name());
  const bool endpoint = base_name == xspace::kSendEventName || base_name == xspace::kRecvDoneEventName;
  const auto channel = e.int_stat(xspace::kChannelIdStat);
  if (!endpoint || !channel) return std::nullopt;
  ChannelEndpoint ep;
  ep.is_send = kind == OpKind::kSend;
  ep.step_num = step_num;
  ep.channel_id = *channel;
  ep.start_ns = e.start_ns();
  ep.end_ns = e.end_ns();
  ep.bytes = static_cast<uint64_t>(e.int_stat(xspace::kBytesStat).value_or(0));
  ep.name = std::string(e.name());
  ep.src_core = e.int_stat(xspace::kSrcCoreStat);
  ep.dst_core = e.int_stat(xspace::kDstCoreStat);
  return ep;
}

ChannelEndpointFinder::ChannelEndpointFinder(const tensorflow::profiler::XPlane& plane, PlaneKind kind)
    : reader_(plane),
      kind_(kind),
      steps_(read_steps_line(reader_)),
      // As in trace_core: group ids number the steps only of planes without a Steps line.
      group_id_stat_(steps_.empty() ? reader_.stat_id(xspace::kGroupIdStat) : std::nullopt) {}

std::optional<ChannelEndpoint> ChannelEndpointFinder::find(const XEventView& e) const {
  const std::string_view line_name = e.line().name();
  if (!is_op_line(kind_, line_name)) return std::nullopt;
  const OpKind kind = classify_op(e.name(), line_name, false);
  if (kind != OpKind::kSend && kind != OpKind::kRecvDone) return std::nullopt;
  auto step = e.int_stat(xspace::kStepNumStat);
  if (!step && group_id_stat_) step = e.int_stat(xspace::kGroupIdStat);
  if (!step) step = step_at(steps_, e.start_ns());
  if (!step) return std::nullopt;
  return channel_endpoint(e, kind, *step);
}

CoreTrace trace_core(const tensorflow::profiler::XPlane& plane_proto, PlaneKind kind,
                     const std::vector<StepSpan>& host_step_markers) {
  const XPlaneReader plane(plane_proto);
  CoreTrace trace;
  trace.plane_id = plane_proto.id();
  trace.plane_name = plane_proto.name();
  trace.kind = kind;
  if (auto host = plane.str_stat(xspace::kHostNameStat)) trace.host_name = std::string(*host);

  std::vector<StepSpan> steps = read_steps_line(plane);
  // Without a Steps line, TF/JAX device ops grouped into steps (a `group_id` stat) make the steps.
  const auto group_id_stat = steps.empty() ? plane.stat_id(xspace::kGroupIdStat) : std::nullopt;
  absl::flat_hash_map<int64_t, GroupSpan> groups;
  // Steps from the host markers, used only when no op carries a group id.
  const bool by_markers = steps.empty() && !host_step_markers.empty();
  absl::flat_hash_map<int64_t, GroupSpan> marker_groups;
  std::vector<OpInterval> ops;
  MetadataTable by_metadata(plane_proto);
  // Collectives without an all_reduce_id are matched by order within the step, per name and group.
  absl::flat_hash_map<std::string, int> collective_order;
  const auto flops_id = plane.stat_id(xspace::kFlopsStat);

  for (const auto& line : plane_proto.lines()) {
    if (!is_op_line(kind, line.name())) continue;
    const size_t line_begin = ops.size();
    ops.reserve(ops.size() + line.events_size());
    plane.for_each_event(line, [&](const XEventView& e) {
      ++trace.event_count;
      const int64_t md = e.proto().metadata_id();
      bool created = false;
      MetadataEntry& entry = by_metadata.get(md, created);
      if (created) {
        // A `flops` stat on the metadata counts for every event of that name.
        const auto metadata_flops = flops_id ? e.double_stat(xspace::kFlopsStat) : std::nullopt;
        entry.kind = classify_op(e.name(), line.name(), metadata_flops && *metadata_flops > 0);
        entry.needs_flops_check =
            kind == PlaneKind::kCustom && entry.kind == OpKind::kLowFlopsCompute && flops_id.has_value();
      }
      OpKind op_kind = entry.kind;
      if (entry.needs_flops_check && has_flops(e.proto(), *flops_id)) op_kind = OpKind::kHighFlopsCompute;
      const int64_t start = e.start_ns();
      const int64_t end = e.end_ns();
      ops.push_back({start, end, op_kind});
      std::optional<int64_t> group;
      if (group_id_stat) {
        if (const auto* stat = event_stat(e.proto(), *group_id_stat)) group = xspace::stat_as_int(*stat);
        if (group) extend_group(groups, *group, start, end);
      }
      const auto marker_step = by_markers ? marker_before(host_step_markers, start) : std::nullopt;
      if (marker_step) extend_group(marker_groups, *marker_step, start, end);
      entry.total.kind = op_kind;
      ++entry.total.occurrences;
      entry.total.total_ns += end - start;

      if (op_kind != OpKind::kCollective && op_kind != OpKind::kSend && op_kind != OpKind::kRecvDone) return;
      auto step = e.int_stat(xspace::kStepNumStat);
      if (!step) step = group_id_stat ? group : step_at(steps, start);
      if (!step) step = marker_step;
      if (!step) return;
      if (op_kind == OpKind::kCollective) {
        CollectiveInstance c;
        c.step_num = *step;
        c.name = std::string(e.name());
        c.duration_ns = end - start;
        c.bytes = static_cast<uint64_t>(e.int_stat(xspace::kBytesStat).value_or(0));
        if (auto group = e.str_stat(xspace::kReplicaGroupStat)) c.replica_group = std::string(*group);
        if (auto id = e.int_stat(xspace::kAllReduceIdStat)) {
          c.match_key = "id:" + std::to_string(*id);
        } else {
          const std::string base =
              (e.name().substr(0, 4) == "nccl" ? std::string("nccl") : c.name) + "|" + c.replica_group;
          c.match_key = base + "#" + std::to_string(collective_order[std::to_string(*step) + "|" + base]++);
        }
        trace.collectives.push_back(std::move(c));
        return;
      }
      if (auto ep = channel_endpoint(e, op_kind, *step)) trace.channel_endpoints.push_back(std::move(*ep));
    });
    // Lines are usually in time order: merging sorted runs keeps the whole core sorted by start cheaply.
    auto by_start = [](const OpInterval& a, const OpInterval& b) { return a.start_ns < b.start_ns; };
    auto line_start = ops.begin() + static_cast<std::ptrdiff_t>(line_begin);
    if (!std::is_sorted(line_start, ops.end(), by_start)) std::sort(line_start, ops.end(), by_start);
    std::inplace_merge(ops.begin(), line_start, ops.end(), by_start);
  }

  const auto& derived = groups.empty() ? marker_groups : groups;
  if (!derived.empty()) {
    for (const auto& [group, span] : derived) steps.push_back({group, span.start_ns, span.end_ns});
    normalize_steps(steps);
  }
  trace.steps = break_down_steps(ops, steps);
  by_metadata.for_each([&](int64_t md, MetadataEntry& entry) {
    entry.total.name = std::string(plane.event_name(md));
    trace.op_totals.push_back(std::move(entry.total));
  });
  return trace;
}

}  // namespace podscope::analysis
