#include "analysis/core_trace.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::analysis {
namespace {

using xspace::XEventView;
using xspace::XPlaneReader;

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

// Traces one device plane in one pass over its op lines: each op classified, its interval kept for the
// breakdown, its step noted (the plane's own, else its file's markers), its totals summed, and the collectives
// and channel endpoints kept for matching across cores.
class CoreTracer final : public CoreTraceReader {
 public:
  CoreTracer(const XPlaneReader& plane, PlaneKind kind, const HostStepMarkers& host_step_markers)
      : plane_(plane),
        kind_(kind),
        own_steps_(plane_),
        by_metadata_(plane.proto()),
        flops_id_(plane_.stat_id(xspace::kFlopsStat)),
        channel_stats_(plane),
        step_num_stat_(plane.stat_id(xspace::kStepNumStat)),
        bytes_stat_(plane.stat_id(xspace::kBytesStat)),
        replica_group_stat_(plane.stat_id(xspace::kReplicaGroupStat)),
        all_reduce_id_stat_(plane.stat_id(xspace::kAllReduceIdStat)) {
    trace_.plane_id = plane.proto().id();
    trace_.plane_name = plane.proto().name();
    trace_.kind = kind;
    if (auto host = plane_.str_stat(xspace::kHostNameStat)) trace_.host_name = std::string(*host);
    trace_.rank = plane_.int_stat(xspace::kRankStat);
    // Steps from the host markers, used only when the plane has none of its own.
    if (!host_step_markers.markers.empty()) {
      marker_steps_.emplace(host_step_markers.markers);
      marker_source_ = host_step_markers.source;
    }
  }

  bool reads_line(const tensorflow::profiler::XLine& line) const override { return is_op_line(kind_, line.name()); }
  void begin_line(const tensorflow::profiler::XLine& line) override {
    line_begin_ = ops_.size();
    ops_.reserve(ops_.size() + line.events_size());
  }
  void add_event(const XEventView& e) override { add_op(e); }
  void end_line(const tensorflow::profiler::XLine&) override { merge_line_into_ops(line_begin_); }

  CoreTrace finish() && override {
    std::vector<StepSpan> steps;
    trace_.source = own_steps_.source();
    if (trace_.source != StepSource::kNone) {
      steps = std::move(own_steps_).take_steps();
    } else if (marker_steps_) {
      steps = std::move(*marker_steps_).take_steps();
      if (!steps.empty()) trace_.source = marker_source_;
    }
    trace_.steps = break_down_steps(ops_, steps, &trace_.idle_gaps);
    by_metadata_.for_each([&](int64_t md, MetadataEntry& entry) {
      entry.total.name = std::string(plane_.event_name(md));
      trace_.op_totals.push_back(std::move(entry.total));
    });
    return std::move(trace_);
  }

 private:
  void add_op(const XEventView& e) {
    ++trace_.event_count;
    MetadataEntry& entry = entry_of(e);
    const OpKind op_kind =
        entry.needs_flops_check && has_flops(e.proto(), *flops_id_) ? OpKind::kHighFlopsCompute : entry.kind;
    const int64_t start = e.start_ns();
    const int64_t end = e.end_ns();
    ops_.push_back({start, end, op_kind});
    std::optional<int64_t> group;
    if (own_steps_.group_id_stat()) {
      if (const auto* stat = event_stat(e.proto(), *own_steps_.group_id_stat())) group = xspace::stat_as_int(*stat);
      own_steps_.add_op(start, end, group);
    }
    const auto marker_step = marker_steps_ ? marker_steps_->add_op(start, end) : std::nullopt;
    entry.total.kind = op_kind;
    ++entry.total.occurrences;
    entry.total.total_ns += end - start;
    if (op_kind != OpKind::kCollective && op_kind != OpKind::kSend && op_kind != OpKind::kRecvDone) return;
    auto step = e.int_stat(step_num_stat_);
    if (!step) step = own_steps_.step_of(start, group);
    if (!step) step = marker_step;
    if (step) keep_cross_core_event(e, op_kind, *step);
  }

  // The op's class, decided once per event metadata id.
  MetadataEntry& entry_of(const XEventView& e) {
    bool created = false;
    MetadataEntry& entry = by_metadata_.get(e.proto().metadata_id(), created);
    if (created) {
      // A `flops` stat on the metadata counts for every event of that name.
      const auto metadata_flops = flops_id_ ? e.double_stat(xspace::kFlopsStat) : std::nullopt;
      entry.kind = classify_op(e.name(), e.line().name(), metadata_flops && *metadata_flops > 0);
      entry.needs_flops_check =
          kind_ == PlaneKind::kCustom && entry.kind == OpKind::kLowFlopsCompute && flops_id_.has_value();
    }
    return entry;
  }

  // Collectives and channel endpoints are matched across cores within a step.
  void keep_cross_core_event(const XEventView& e, OpKind op_kind, int64_t step) {
    if (op_kind != OpKind::kCollective) {
      if (auto ep = channel_endpoint(e, op_kind, step, channel_stats_)) {
        trace_.channel_endpoints.push_back(std::move(*ep));
      }
      return;
    }
    CollectiveInstance c;
    c.step_num = step;
    c.name = std::string(e.name());
    c.duration_ns = e.end_ns() - e.start_ns();
    c.bytes = static_cast<uint64_t>(e.int_stat(bytes_stat_).value_or(0));
    if (auto group = e.str_stat(replica_group_stat_)) c.replica_group = std::string(*group);
    if (auto id = e.int_stat(all_reduce_id_stat_)) {
      c.match_key = "id:" + std::to_string(*id);
    } else {
      // Without an all_reduce_id, matched by order within the step, per name and group.
      const std::string base = (e.name().substr(0, 4) == "nccl" ? std::string("nccl") : c.name) + "|" + c.replica_group;
      c.match_key = base + "#" + std::to_string(collective_order_[std::to_string(step) + "|" + base]++);
    }
    trace_.collectives.push_back(std::move(c));
  }

  // Lines are usually in time order: merging sorted runs keeps the whole core sorted by start cheaply.
  void merge_line_into_ops(size_t line_begin) {
    auto by_start = [](const OpInterval& a, const OpInterval& b) { return a.start_ns < b.start_ns; };
    auto line_start = ops_.begin() + static_cast<std::ptrdiff_t>(line_begin);
    if (!std::is_sorted(line_start, ops_.end(), by_start)) std::sort(line_start, ops_.end(), by_start);
    std::inplace_merge(ops_.begin(), line_start, ops_.end(), by_start);
  }

  const XPlaneReader& plane_;
  const PlaneKind kind_;
  CoreTrace trace_;
  size_t line_begin_ = 0;  // where the line being read starts in ops_
  DeviceStepSpans own_steps_;
  std::optional<MarkerStepSpans> marker_steps_;
  StepSource marker_source_ = StepSource::kNone;
  MetadataTable by_metadata_;
  const std::optional<int64_t> flops_id_;
  const ChannelStatIds channel_stats_;
  const std::optional<int64_t> step_num_stat_;
  const std::optional<int64_t> bytes_stat_;
  const std::optional<int64_t> replica_group_stat_;
  const std::optional<int64_t> all_reduce_id_stat_;
  std::vector<OpInterval> ops_;
  absl::flat_hash_map<std::string, int> collective_order_;
};

}  // namespace

ChannelStatIds::ChannelStatIds(const XPlaneReader& plane)
    : channel_id(plane.stat_id(xspace::kChannelIdStat)),
      bytes(plane.stat_id(xspace::kBytesStat)),
      src_core(plane.stat_id(xspace::kSrcCoreStat)),
      dst_core(plane.stat_id(xspace::kDstCoreStat)) {}

std::optional<ChannelEndpoint> channel_endpoint(const XEventView& e, OpKind kind, int64_t step_num,
                                                const ChannelStatIds& stats) {
  // Sends and recv-dones that carry a channel id (async "recv" / "send-done" halves are not endpoints).
  if (kind != OpKind::kSend && kind != OpKind::kRecvDone) return std::nullopt;
  const std::string_view base_name = strip_instance_suffix(e.name());
  const bool endpoint = base_name == xspace::kSendEventName || base_name == xspace::kRecvDoneEventName;
  const auto channel = e.int_stat(stats.channel_id);
  if (!endpoint || !channel) return std::nullopt;
  ChannelEndpoint ep;
  ep.is_send = kind == OpKind::kSend;
  ep.step_num = step_num;
  ep.channel_id = *channel;
  ep.start_ns = e.start_ns();
  ep.end_ns = e.end_ns();
  ep.bytes = static_cast<uint64_t>(e.int_stat(stats.bytes).value_or(0));
  ep.name = std::string(e.name());
  ep.src_core = e.int_stat(stats.src_core);
  ep.dst_core = e.int_stat(stats.dst_core);
  return ep;
}

ChannelEndpointFinder::ChannelEndpointFinder(const tensorflow::profiler::XPlane& plane, PlaneKind kind)
    : reader_(plane),
      kind_(kind),
      steps_(reader_),
      stats_(reader_),
      step_num_stat_(reader_.stat_id(xspace::kStepNumStat)),
      group_id_stat_(reader_.stat_id(xspace::kGroupIdStat)) {}

std::optional<ChannelEndpoint> ChannelEndpointFinder::find(const XEventView& e) const {
  const std::string_view line_name = e.line().name();
  if (!is_op_line(kind_, line_name)) return std::nullopt;
  const OpKind kind = classify_op(e.name(), line_name, false);
  if (kind != OpKind::kSend && kind != OpKind::kRecvDone) return std::nullopt;
  auto step = e.int_stat(step_num_stat_);
  if (!step) step = steps_.step_of(e.start_ns(), steps_.group_id_stat() ? e.int_stat(group_id_stat_) : std::nullopt);
  if (!step) return std::nullopt;
  return channel_endpoint(e, kind, *step, stats_);
}

void fill_idle_with_host_work(CoreTrace& trace, const std::vector<TypedInterval>& host_segments) {
  const std::vector<EventTypeDurations> in_gaps = distribute_segments(host_segments, trace.idle_gaps);
  size_t step = 0;
  for (size_t g = 0; g < trace.idle_gaps.size(); ++g) {
    while (step < trace.steps.size() && trace.steps[step].span.end_ns <= trace.idle_gaps[g].start_ns) ++step;
    if (step == trace.steps.size()) break;
    const GenericBreakdown host = generic_breakdown(in_gaps[g]);
    StepBreakdown& s = trace.steps[step];
    s.kernel_launch_ns += host.host_prepare_ns;
    s.host_compute_ns += host.host_compute_ns;
    s.compilation_ns += host.host_compile_ns;
  }
  trace.idle_gaps = {};
}

std::unique_ptr<CoreTraceReader> make_core_trace_reader(const XPlaneReader& plane, PlaneKind kind,
                                                        const HostStepMarkers& host_step_markers) {
  return std::make_unique<CoreTracer>(plane, kind, host_step_markers);
}

CoreTrace trace_core(const tensorflow::profiler::XPlane& plane, PlaneKind kind,
                     const HostStepMarkers& host_step_markers) {
  const XPlaneReader reader(plane);
  CoreTracer tracer(reader, kind, host_step_markers);
  PlaneEventReader* readers[] = {&tracer};
  walk_plane(reader, readers);
  return std::move(tracer).finish();
}

}  // namespace podscope::analysis
