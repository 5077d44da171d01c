#include "analysis/steps/step_database.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "analysis/steps/channel_endpoints.h"
#include "analysis/steps/core_activity.h"
#include "analysis/steps/step_breakdown.h"
#include "analysis/steps/step_spans.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::analysis {
namespace {

using podscope::v1::CoreStepDatabase;
using podscope::v1::HostStepDatabase;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XStat;
using xspace::XEventView;
using xspace::XPlaneReader;

// XProf's kTensorShapes: a TF op's input shapes with their types, e.g. "(half[4,384];half[])".
constexpr std::string_view kTensorShapesStat = "shape";

// Entry by event metadata id: a plain vector when the plane's ids are dense (they are numbered from 1 by every
// writer we know), a hash map otherwise. It is looked up once per event.
template <typename Entry>
class MetadataTable {
 public:
  explicit MetadataTable(const XPlane& plane) {
    int64_t max_id = 0;
    for (const auto& [id, md] : plane.event_metadata()) max_id = std::max(max_id, id);
    const auto count = static_cast<int64_t>(plane.event_metadata_size());
    if (max_id < kMaxDenseId && max_id <= 4 * count + 1024) dense_.resize(static_cast<size_t>(max_id) + 1);
  }

  // The entry for `id`; `created` says it was not there before.
  Entry& get(int64_t id, bool& created) {
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

 private:
  static constexpr int64_t kMaxDenseId = 1 << 22;
  std::vector<std::optional<Entry>> dense_;
  absl::flat_hash_map<int64_t, Entry> sparse_;
};

// Per event metadata id of a device plane: the op's kind and type (decided once per name), its metadata's stats
// (which count for every event without its own) and its row.
struct OpEntry {
  OpKind kind = OpKind::kLowFlopsCompute;
  // Annotated cores: an occurrence's own positive `flops` stat makes low-flops compute high in the pod viewer.
  bool needs_flops_check = false;
  EventType type = EventType::kDeviceCompute32;
  int slot = 0;  // into the core's ops
  const XStat* flops = nullptr;
  const XStat* bytes_accessed = nullptr;
  const XStat* tensor_shapes = nullptr;
};

// The ids of the stats an op's event is read for; an absent stat gets an id no stat has.
struct OpStatIds {
  static constexpr int64_t kAbsent = std::numeric_limits<int64_t>::min();
  int64_t flops = kAbsent;
  int64_t bytes_accessed = kAbsent;
  int64_t tensor_shapes = kAbsent;
  int64_t group_id = kAbsent;
  int64_t correlation_id = kAbsent;  // read on GPU stream lines only
};

const XStat* find_stat(const google::protobuf::RepeatedPtrField<XStat>& stats, int64_t id) {
  if (id == OpStatIds::kAbsent) return nullptr;
  for (const auto& stat : stats) {
    if (stat.metadata_id() == id) return &stat;
  }
  return nullptr;
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

podscope::v1::StepSource to_proto(StepSource source) {
  switch (source) {
    case StepSource::kNone: return podscope::v1::STEP_SOURCE_NONE;
    case StepSource::kStepsLine: return podscope::v1::STEP_SOURCE_STEPS_LINE;
    case StepSource::kGroupIds: return podscope::v1::STEP_SOURCE_GROUP_IDS;
    case StepSource::kHostMarkers: return podscope::v1::STEP_SOURCE_HOST_MARKERS;
    case StepSource::kNvtxRanges: return podscope::v1::STEP_SOURCE_NVTX_RANGES;
  }
  return podscope::v1::STEP_SOURCE_NONE;
}

podscope::v1::CoreKind to_proto(PlaneKind kind) {
  switch (kind) {
    case PlaneKind::kCustom: return podscope::v1::CORE_KIND_CUSTOM;
    case PlaneKind::kTpu: return podscope::v1::CORE_KIND_TPU;
    case PlaneKind::kGpu: return podscope::v1::CORE_KIND_GPU;
  }
  return podscope::v1::CORE_KIND_CUSTOM;
}

void add_input_ops(const std::vector<InputOpTotal>& totals,
                   google::protobuf::RepeatedPtrField<podscope::v1::InputOp>& out) {
  for (const InputOpTotal& t : totals) {
    auto* op = out.Add();
    op->set_name(t.name);
    op->set_category(static_cast<int32_t>(t.category));
    op->set_count(t.count);
    op->set_time_ns(t.time_ns);
    op->set_self_ns(t.self_ns);
  }
}

// A collective or channel endpoint as read: its step known while the plane streams (a `step_num` stat, the plane's
// own steps) or once its file's host markers are.
struct CrossCoreEvent {
  std::optional<int64_t> step;
  int64_t start_ns = 0;
  bool is_collective = false;
  std::optional<int64_t> all_reduce_id;
  ChannelEndpoint endpoint;             // a channel endpoint
  podscope::v1::Collective collective;  // a collective, without its step and match key
};

// The segments (by start, disjoint) within the windows (sorted, not overlapping), cut at their edges.
std::vector<TypedInterval> clip_to_windows(const std::vector<TypedInterval>& segments,
                                           const std::vector<TimeSpan>& windows) {
  std::vector<TypedInterval> out;
  size_t w = 0;
  for (const TypedInterval& s : segments) {
    while (w < windows.size() && windows[w].end_ns <= s.start_ns) ++w;
    for (size_t v = w; v < windows.size() && windows[v].start_ns < s.end_ns; ++v) {
      const int64_t start = std::max(s.start_ns, windows[v].start_ns);
      const int64_t end = std::min(s.end_ns, windows[v].end_ns);
      if (end > start) out.push_back({start, end, s.type});
    }
  }
  return out;
}

std::vector<TimeSpan> windows_of(const std::vector<StepSpan>& steps) {
  std::vector<TimeSpan> windows;
  windows.reserve(steps.size());
  for (const StepSpan& s : steps) windows.push_back({s.start_ns, s.end_ns});
  return windows;
}

// One step of a core broken down both ways, until the keep rule.
struct StepDraft {
  StepBreakdown by_kind;  // the pod viewer's: op kinds, idle time and the host work in it
  EventTypeDurations type_ns{};
  int64_t device_busy_ns = 0;
  int64_t host_busy_ns = 0;
};

// A core of the file being read: what its walk read, then broken down into its steps once they are known (a plane
// without steps of its own waits for its file's markers).
struct CoreDraft {
  CoreStepDatabase db;  // identity, event count, op and input-stage totals, capability, batch size
  bool host_core = false;
  StepSource source = StepSource::kNone;
  std::vector<StepSpan> spans;
  // Until its steps are known: every op (the pod viewer's kinds) and every typed event (the step tools' types).
  std::vector<OpInterval> ops;
  std::vector<TypedInterval> events;
  std::vector<CrossCoreEvent> cross;
  // Once they are: each step both ways, where no op ran (the pod viewer's idle time) and where no event did (the
  // step tools' unknown time), which the file's host work fills; the plane's events by priority within its steps.
  std::vector<StepDraft> steps;
  std::vector<TimeSpan> kind_gaps;
  std::vector<TimeSpan> type_gaps;
  std::vector<TypedInterval> segments;
  // The core's own events that are not device work (an annotated core's input stages), disjoint: with its file's
  // host work they fill the time no op ran.
  std::vector<TypedInterval> own_host_work;
  // A GPU core's stream events, until its file's runtime calls are known (its activity's streams and launches).
  std::vector<StreamEvents> streams;

  void break_down(std::vector<StepSpan> step_spans) {
    // Before the breakdown reorders the ops; a GPU core's is its streams' (add_streams_and_launches).
    if (!host_core && streams.empty()) *db.mutable_activity() = activity_of_ops(ops);
    spans = std::move(step_spans);
    const std::vector<TimeSpan> windows = windows_of(spans);
    const std::vector<StepBreakdown> by_kind = break_down_steps(ops, spans, &kind_gaps);
    std::vector<TypedInterval> host_side;
    for (const TypedInterval& e : events) {
      if (!is_device_event_type(e.type)) host_side.push_back(e);
    }
    const std::vector<TypedInterval> disjoint = disjoint_by_priority(events);
    const std::vector<EventTypeDurations> by_type = distribute_segments(disjoint, windows, nullptr, &type_gaps);
    std::vector<int64_t> host_busy;
    break_down_by_type(host_side, windows, &host_busy);
    own_host_work = disjoint_by_priority(host_side);
    steps.resize(spans.size());
    for (size_t i = 0; i < spans.size(); ++i) {
      StepDraft& step = steps[i];
      step.by_kind = by_kind[i];
      step.type_ns = by_type[i];
      for (int t = 0; t < kEventTypeCount; ++t) {
        if (is_device_event_type(static_cast<EventType>(t))) step.device_busy_ns += by_type[i][t];
      }
      step.host_busy_ns = host_busy[i];
    }
    segments = clip_to_windows(disjoint, windows);
    ops = {};
    events = {};
  }

  // The file's host work (disjoint typed segments by start) fills the gaps: in the pod viewer's idle time as kernel
  // launch, host compute and compilation; in the step tools' unknown time by type, where it also counts as host busy
  // time and joins the core's time line.
  void fill_gaps_with_host_work(const std::vector<TypedInterval>& host) {
    std::vector<EventTypeDurations> in_kind_gaps;
    if (own_host_work.empty()) {
      in_kind_gaps = distribute_segments(host, kind_gaps);
    } else {
      std::vector<TypedInterval> work = host;
      work.insert(work.end(), own_host_work.begin(), own_host_work.end());
      in_kind_gaps = distribute_segments(disjoint_by_priority(work), kind_gaps);
      own_host_work = {};
    }
    size_t step = 0;
    for (size_t g = 0; g < kind_gaps.size(); ++g) {
      while (step < spans.size() && spans[step].end_ns <= kind_gaps[g].start_ns) ++step;
      if (step == spans.size()) break;
      const GenericBreakdown work = generic_breakdown(in_kind_gaps[g]);
      StepBreakdown& s = steps[step].by_kind;
      s.kernel_launch_ns += work.host_prepare_ns;
      s.host_compute_ns += work.host_compute_ns;
      s.compilation_ns += work.host_compile_ns;
      s.input_wait_ns += work.input_ns();
    }
    kind_gaps = {};
    if (host.empty() || spans.empty()) {
      type_gaps = {};
      return;
    }
    const std::vector<EventTypeDurations> in_type_gaps = distribute_segments(host, type_gaps);
    step = 0;
    for (size_t g = 0; g < type_gaps.size(); ++g) {
      while (step < spans.size() && spans[step].end_ns <= type_gaps[g].start_ns) ++step;
      if (step == spans.size()) break;
      EventTypeDurations& d = steps[step].type_ns;
      for (int t = 1; t < kEventTypeCount; ++t) {
        d[t] += in_type_gaps[g][t];
        d[0] -= in_type_gaps[g][t];
      }
    }
    std::vector<int64_t> busy;
    distribute_segments(host, windows_of(spans), &busy);
    for (size_t i = 0; i < spans.size(); ++i) steps[i].host_busy_ns = std::max(steps[i].host_busy_ns, busy[i]);
    const std::vector<TypedInterval> in_gaps = clip_to_windows(host, type_gaps);
    std::vector<TypedInterval> line;
    line.reserve(segments.size() + in_gaps.size());
    std::merge(segments.begin(), segments.end(), in_gaps.begin(), in_gaps.end(), std::back_inserter(line),
               [](const TypedInterval& a, const TypedInterval& b) { return a.start_ns < b.start_ns; });
    segments = std::move(line);
    type_gaps = {};
  }

  // The collectives and channel endpoints with a step, each collective keyed for matching across cores.
  void key_cross_core_events() {
    absl::flat_hash_map<std::string, int> order;
    for (CrossCoreEvent& e : cross) {
      if (!e.step) continue;
      if (!e.is_collective) {
        e.endpoint.step_num = *e.step;
        continue;
      }
      e.collective.set_step_num(*e.step);
      if (e.all_reduce_id) {
        e.collective.set_match_key("id:" + std::to_string(*e.all_reduce_id));
      } else {
        // Without an all_reduce_id, matched by order within the step, per name and group.
        const std::string base =
            (e.collective.name().substr(0, 4) == "nccl" ? std::string("nccl") : e.collective.name()) + "|" +
            e.collective.replica_group();
        e.collective.set_match_key(base + "#" + std::to_string(order[std::to_string(*e.step) + "|" + base]++));
      }
    }
  }
};

// Reads one device plane in one walk over its lines: its input stages, and each op classified both ways (op kind,
// event type), summed per op and kept as an interval for the breakdowns, its step noted where the plane's own steps
// or a `step_num` stat tell it (collectives and channel endpoints).
class CoreReader final : public PlaneEventReader {
 public:
  CoreReader(const XPlaneReader& plane, PlaneKind kind)
      : plane_(plane),
        kind_(kind),
        own_steps_(plane),
        table_(plane.proto()),
        channel_stats_(plane),
        step_num_stat_(plane.stat_id(xspace::kStepNumStat)),
        bytes_stat_(plane.stat_id(xspace::kBytesStat)),
        replica_group_stat_(plane.stat_id(xspace::kReplicaGroupStat)),
        all_reduce_id_stat_(plane.stat_id(xspace::kAllReduceIdStat)),
        correlation_stat_(plane.stat_id(xspace::kCorrelationIdStat).value_or(OpStatIds::kAbsent)) {
    CoreStepDatabase& db = core_.db;
    db.set_plane_id(plane.proto().id());
    db.set_plane_name(plane.proto().name());
    db.set_kind(to_proto(kind));
    if (auto host = plane.str_stat(xspace::kHostNameStat)) db.set_host_name(std::string(*host));
    if (auto rank = plane.int_stat(xspace::kRankStat)) db.set_rank(*rank);
    const DeviceCapability c = read_device_capability(plane);
    auto& capability = *db.mutable_capability();
    capability.set_clock_rate_khz(c.clock_rate_khz);
    capability.set_core_count(c.core_count);
    capability.set_memory_bandwidth_bytes_per_s(c.memory_bandwidth_bytes_per_s);
    capability.set_compute_cap_major(c.compute_cap_major);
    capability.set_compute_cap_minor(c.compute_cap_minor);
    db.set_batch_size(read_batch_size(plane));
    ids_.flops = plane.stat_id(xspace::kFlopsStat).value_or(OpStatIds::kAbsent);
    ids_.bytes_accessed = plane.stat_id(xspace::kBytesAccessedStat).value_or(OpStatIds::kAbsent);
    ids_.tensor_shapes = plane.stat_id(kTensorShapesStat).value_or(OpStatIds::kAbsent);
    ids_.group_id = own_steps_.group_id_stat().value_or(OpStatIds::kAbsent);
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
    stream_ = nullptr;
    ids_.correlation_id = OpStatIds::kAbsent;
    if (kind_ == PlaneKind::kGpu && line.name().starts_with("Stream #")) {
      ids_.correlation_id = correlation_stat_;
      stream_ = &core_.streams.emplace_back();
      stream_->name = line.name();
      stream_->stream_id = line.id();
      stream_->events.reserve(static_cast<size_t>(line.events_size()));
    }
    line_begin_ = core_.ops.size();
    core_.ops.reserve(core_.ops.size() + static_cast<size_t>(line.events_size()));
    core_.events.reserve(core_.events.size() + static_cast<size_t>(line.events_size()));
  }
  void add_event(const XEventView& e) override {
    if (input_stages_) {
      input_stages_->add(e, core_.events);
    } else {
      add_op(e);
    }
  }
  void end_line(const tensorflow::profiler::XLine&) override {
    if (!input_stages_) {
      merge_line_into_ops();
      return;
    }
    stages_.push_back(std::move(*input_stages_).take());
    input_stages_.reset();
  }

  // The core as read: broken down into its own steps, or waiting with its events for its file's markers.
  CoreDraft finish() && {
    for (const OpRow& row : ops_) {
      auto* op = core_.db.add_ops();
      op->set_name(row.name);
      op->set_kind(static_cast<int32_t>(row.kind));
      op->set_pod_kind(static_cast<int32_t>(row.pod_kind));
      op->set_occurrences(row.occurrences);
      op->set_total_ns(row.total_ns);
      op->set_self_ns(row.self_ns);
      op->set_flops(row.flops);
      op->set_bytes_accessed(row.bytes_accessed);
    }
    for (auto& stages : stages_) add_input_ops(stages, *core_.db.mutable_input_stages());
    core_.source = own_steps_.source();
    std::vector<StepSpan> steps = std::move(own_steps_).take_steps();
    if (core_.source != StepSource::kNone) {
      core_.key_cross_core_events();
      core_.break_down(std::move(steps));
    }
    return std::move(core_);
  }

 private:
  // A device op summed over its occurrences (one row per event name of the plane).
  struct OpRow {
    std::string name;
    OpKind kind = OpKind::kLowFlopsCompute;
    OpKind pod_kind = OpKind::kLowFlopsCompute;
    uint64_t occurrences = 0;
    int64_t total_ns = 0;
    int64_t self_ns = 0;
    double flops = 0;
    double bytes_accessed = 0;
  };

  // The stats an op's event is read for: its own, else its op's (metadata), in one pass over its stats.
  struct OpStats {
    const XStat* flops = nullptr;
    bool own_flops = false;
    const XStat* bytes_accessed = nullptr;
    const XStat* tensor_shapes = nullptr;
    const XStat* group = nullptr;
    const XStat* correlation = nullptr;
  };

  bool is_input_line(const tensorflow::profiler::XLine& line) const {
    return kind_ == PlaneKind::kCustom && line.name() == xspace::kInputPipelineLineName;
  }

  void add_op(const XEventView& e) {
    CoreStepDatabase& db = core_.db;
    db.set_event_count(db.event_count() + 1);
    bool created = false;
    OpEntry& entry = table_.get(e.proto().metadata_id(), created);
    if (created) read_metadata_stats(e, entry);
    const OpStats stats = op_stats(e, entry);
    const double flops = stats.flops ? xspace::stat_as_double(*stats.flops).value_or(0) : 0;
    if (created) {
      entry.kind = classify_op(e.name(), e.line().name(), flops > 0);
      entry.needs_flops_check =
          kind_ == PlaneKind::kCustom && entry.kind == OpKind::kLowFlopsCompute && ids_.flops != OpStatIds::kAbsent;
      entry.type = device_event_type(entry.kind, e.name(), "");
      entry.slot = static_cast<int>(ops_.size());
      ops_.push_back({.name = std::string(e.name()), .kind = entry.kind});
    }
    const OpKind pod_kind =
        entry.needs_flops_check && stats.own_flops && flops > 0 ? OpKind::kHighFlopsCompute : entry.kind;
    EventType type = entry.type;
    if (stats.tensor_shapes && (type == EventType::kDeviceCompute32 || type == EventType::kDeviceCompute16)) {
      if (auto shapes = plane_.str_of(stats.tensor_shapes)) type = device_event_type(entry.kind, e.name(), *shapes);
    }
    const int64_t start = e.start_ns();
    const int64_t end = e.end_ns();
    core_.ops.push_back({start, end, pod_kind});
    core_.events.push_back({start, end, type});
    if (stream_) {
      const int64_t correlation = stats.correlation ? xspace::stat_as_int(*stats.correlation).value_or(0) : 0;
      stream_->events.push_back({start, end, pod_kind, correlation});
    }
    OpRow& op = ops_[static_cast<size_t>(entry.slot)];
    op.pod_kind = pod_kind;
    ++op.occurrences;
    op.total_ns += end - start;
    op.self_ns += end - start;
    op.flops += flops;
    if (stats.bytes_accessed) op.bytes_accessed += xspace::stat_as_double(*stats.bytes_accessed).value_or(0);
    nesting_.add(start, end, static_cast<size_t>(entry.slot),
                 [&](size_t slot) -> int64_t& { return ops_[slot].self_ns; });
    const std::optional<int64_t> group = stats.group ? xspace::stat_as_int(*stats.group) : std::nullopt;
    if (stats.group) own_steps_.add_op(start, end, group);
    if (pod_kind == OpKind::kCollective || pod_kind == OpKind::kSend || pod_kind == OpKind::kRecvDone) {
      keep_cross_core_event(e, pod_kind, group);
    }
  }

  void read_metadata_stats(const XEventView& e, OpEntry& entry) const {
    if (const auto* metadata = plane_.event_metadata(e.proto().metadata_id())) {
      entry.flops = find_stat(metadata->stats(), ids_.flops);
      entry.bytes_accessed = find_stat(metadata->stats(), ids_.bytes_accessed);
      entry.tensor_shapes = find_stat(metadata->stats(), ids_.tensor_shapes);
    }
  }

  OpStats op_stats(const XEventView& e, const OpEntry& entry) const {
    OpStats stats;
    for (const auto& stat : e.proto().stats()) {
      const int64_t id = stat.metadata_id();
      if (id == ids_.flops && !stats.flops) stats.flops = &stat;
      else if (id == ids_.bytes_accessed && !stats.bytes_accessed) stats.bytes_accessed = &stat;
      else if (id == ids_.tensor_shapes && !stats.tensor_shapes) stats.tensor_shapes = &stat;
      else if (id == ids_.group_id && !stats.group) stats.group = &stat;
      else if (id == ids_.correlation_id && !stats.correlation) stats.correlation = &stat;
    }
    stats.own_flops = stats.flops != nullptr;
    if (!stats.flops) stats.flops = entry.flops;
    if (!stats.bytes_accessed) stats.bytes_accessed = entry.bytes_accessed;
    if (!stats.tensor_shapes) stats.tensor_shapes = entry.tensor_shapes;
    return stats;
  }

  // Collectives and channel endpoints are matched across cores within a step: their step is their `step_num` stat,
  // else the plane's own step of them, else (decided when the file ends) its file's host marker's.
  void keep_cross_core_event(const XEventView& e, OpKind kind, std::optional<int64_t> group) {
    CrossCoreEvent event;
    event.step = e.int_stat(step_num_stat_);
    if (!event.step) event.step = own_steps_.step_of(e.start_ns(), group);
    event.start_ns = e.start_ns();
    if (kind != OpKind::kCollective) {
      auto endpoint = channel_endpoint(e, kind, 0, channel_stats_);
      if (!endpoint) return;
      event.endpoint = std::move(*endpoint);
    } else {
      event.is_collective = true;
      event.collective.set_name(std::string(e.name()));
      event.collective.set_duration_ns(e.end_ns() - e.start_ns());
      event.collective.set_bytes(static_cast<uint64_t>(e.int_stat(bytes_stat_).value_or(0)));
      if (auto group_name = e.str_stat(replica_group_stat_))
        event.collective.set_replica_group(std::string(*group_name));
      event.all_reduce_id = e.int_stat(all_reduce_id_stat_);
    }
    core_.cross.push_back(std::move(event));
  }

  // Lines are usually in time order: merging sorted runs keeps the core's ops sorted by start cheaply.
  void merge_line_into_ops() {
    auto by_start = [](const OpInterval& a, const OpInterval& b) { return a.start_ns < b.start_ns; };
    auto& ops = core_.ops;
    auto line_start = ops.begin() + static_cast<std::ptrdiff_t>(line_begin_);
    if (!std::is_sorted(line_start, ops.end(), by_start)) std::sort(line_start, ops.end(), by_start);
    std::inplace_merge(ops.begin(), line_start, ops.end(), by_start);
  }

  const XPlaneReader& plane_;
  const PlaneKind kind_;
  CoreDraft core_;
  DeviceStepSpans own_steps_;
  MetadataTable<OpEntry> table_;
  OpStatIds ids_;
  const ChannelStatIds channel_stats_;
  const std::optional<int64_t> step_num_stat_;
  const std::optional<int64_t> bytes_stat_;
  const std::optional<int64_t> replica_group_stat_;
  const std::optional<int64_t> all_reduce_id_stat_;
  const int64_t correlation_stat_;
  StreamEvents* stream_ = nullptr;                    // of the GPU stream line being read
  size_t line_begin_ = 0;                             // where the op line being read starts in the core's ops
  NestingTracker nesting_;                            // of the op line being read
  std::optional<InputStageLineReader> input_stages_;  // while the Input Pipeline line is read
  std::vector<OpRow> ops_;
  std::vector<std::vector<InputOpTotal>> stages_;
};

// The markers' step of an event: the last marker started at or before it (none before the first).
std::optional<int64_t> marker_step(const std::vector<StepSpan>& markers, int64_t start_ns) {
  auto it = std::upper_bound(markers.begin(), markers.end(), start_ns,
                             [](int64_t t, const StepSpan& s) { return t < s.start_ns; });
  if (it == markers.begin()) return std::nullopt;
  return std::prev(it)->step_num;
}

}  // namespace

struct HostStepDatabaseBuilder::File {
  FileSteps steps;  // host name, capture window, host step markers
  HostActivity host;
  std::optional<int64_t> host_clock_offset_ns;
  std::optional<int64_t> device_clock_offset_ns;  // the first device plane's that states one
  std::vector<CoreDraft> cores;

  // A core without steps of its own (read, not yet broken down) takes them from the file's host step markers, unless
  // another device plane of the file had steps of its own (then TF grouped the file's events from these markers, and
  // this plane had no step work). Each op belongs to the last marker started at or before it; a step spans its first op
  // to its last.
  void take_steps_from_markers(CoreDraft& core) const {
    const HostStepMarkers& markers = steps.markers_for_unstepped_planes();
    std::vector<StepSpan> spans;
    if (!markers.markers.empty() && !core.ops.empty()) {
      MarkerStepSpans by_markers(markers.markers);
      for (const OpInterval& op : core.ops) by_markers.add_op(op.start_ns, op.end_ns);
      spans = std::move(by_markers).take_steps();
      if (!spans.empty()) core.source = markers.source;
      for (CrossCoreEvent& e : core.cross) {
        if (!e.step) e.step = marker_step(markers.markers, e.start_ns);
      }
    }
    core.key_cross_core_events();
    core.break_down(std::move(spans));
  }

  // A file with host step markers and no device plane (TensorFlow or JAX on CPU): its /host:CPU plane is its one
  // core, its steps are the markers and the host's activity explains each step's whole time.
  void add_host_core() {
    CoreDraft core;
    core.host_core = true;
    core.db.set_plane_name(std::string(xspace::kHostPlaneName));
    core.db.set_kind(podscope::v1::CORE_KIND_HOST);
    core.source = steps.host_markers().source;
    core.break_down(steps.host_markers().markers);
    // Each step's whole time is the host's to explain, step by step.
    core.type_gaps = windows_of(core.spans);
    core.kind_gaps = core.type_gaps;
    cores.push_back(std::move(core));
    // Without a device, nothing launches kernels: TF's executor dispatch runs the ops on the CPU itself.
    for (TypedInterval& i : host.intervals) {
      if (i.type == EventType::kHostPrepare) i.type = EventType::kHostCompute;
    }
    host.intervals.insert(host.intervals.end(), host.untyped.begin(), host.untyped.end());
  }
};

struct HostStepDatabaseBuilder::PlaneWalk {
  std::optional<HostStepMarkerReader> markers;
  std::optional<HostActivityReader> host_activity;
  std::optional<CoreReader> core;
};

HostStepDatabaseBuilder::HostStepDatabaseBuilder() : file_(std::make_unique<File>()) {}
HostStepDatabaseBuilder::~HostStepDatabaseBuilder() = default;

bool HostStepDatabaseBuilder::wants_line(std::string_view plane_name, std::string_view line_name) {
  if (plane_name == xspace::kHostPlaneName || plane_name == xspace::kCuptiHostPlaneName) {
    return line_name != xspace::kCountersLineName;
  }
  const auto kind = device_plane_kind(plane_name);
  return kind && (line_name == xspace::kStepsLineName || is_op_line(*kind, line_name) ||
                  (*kind == PlaneKind::kCustom && line_name == xspace::kInputPipelineLineName));
}

void HostStepDatabaseBuilder::begin_plane(size_t, const XPlaneReader& plane, std::vector<PlaneEventReader*>& readers) {
  walk_ = std::make_unique<PlaneWalk>();
  if (plane.name() == xspace::kHostPlaneName || plane.name() == xspace::kCuptiHostPlaneName) {
    if (plane.name() == xspace::kHostPlaneName) {
      file_->steps.add_host_plane(plane.proto());
      if (auto offset = plane.int_stat(xspace::kClockOffsetStat)) file_->host_clock_offset_ns = offset;
      readers.push_back(&walk_->markers.emplace());
    }
    readers.push_back(&walk_->host_activity.emplace(plane, file_->host));
    return;
  }
  const auto kind = device_plane_kind(plane.name());
  if (!kind) return;
  if (!file_->device_clock_offset_ns) file_->device_clock_offset_ns = plane.int_stat(xspace::kClockOffsetStat);
  readers.push_back(&walk_->core.emplace(plane, *kind));
}

void HostStepDatabaseBuilder::end_plane(size_t) {
  const std::unique_ptr<PlaneWalk> walk = std::move(walk_);
  if (!walk) return;
  if (walk->markers) file_->steps.set_host_markers(std::move(*walk->markers).finish());
  if (walk->host_activity) std::move(*walk->host_activity).finish();
  if (walk->core) {
    file_->cores.push_back(std::move(*walk->core).finish());
    file_->steps.add_device_plane_source(file_->cores.back().source);
  }
}

namespace {

// Each GPU core's streams' idle time and launches, its stream events paired with the file's runtime calls.
void add_streams_and_launches(std::vector<CoreDraft>& cores, const std::vector<RuntimeCall>& runtime_calls) {
  const bool any = std::any_of(cores.begin(), cores.end(), [](const CoreDraft& c) { return !c.streams.empty(); });
  if (!any) return;
  RuntimeCalls calls;
  calls.reserve(runtime_calls.size());
  for (const RuntimeCall& call : runtime_calls) calls.try_emplace(call.correlation_id, call);
  for (CoreDraft& core : cores) {
    if (core.streams.empty()) continue;
    add_stream_activity(core.streams, calls, *core.db.mutable_activity());
    core.streams = {};
  }
}

// The keep rule's share of one host: a step cut by the capture window's edge, and a device core's step in which no
// device event ran, are dropped and counted. The kept steps, their time line, collectives and endpoints go into the
// database.
void keep_whole_steps(CoreDraft& draft, const FileSteps& file) {
  CoreStepDatabase& db = draft.db;
  db.set_source(to_proto(draft.source));
  db.set_steps_found(static_cast<uint32_t>(draft.spans.size()));
  std::vector<TimeSpan> kept;
  for (size_t i = 0; i < draft.spans.size(); ++i) {
    const StepSpan& span = draft.spans[i];
    const StepDraft& s = draft.steps[i];
    if (file.cut_by_window(span.start_ns, span.end_ns)) {
      db.set_steps_cut_by_window(db.steps_cut_by_window() + 1);
      continue;
    }
    if (!draft.host_core && s.device_busy_ns == 0) {
      db.set_steps_without_device_work(db.steps_without_device_work() + 1);
      continue;
    }
    kept.push_back({span.start_ns, span.end_ns});
    auto* step = db.add_steps();
    step->set_step_num(span.step_num);
    step->set_start_ns(span.start_ns);
    step->set_end_ns(span.end_ns);
    for (const int64_t ns : s.by_kind.op_ns) step->add_op_ns(ns);
    step->set_idle_ns(s.by_kind.idle_ns);
    step->set_kernel_launch_ns(s.by_kind.kernel_launch_ns);
    step->set_host_compute_ns(s.by_kind.host_compute_ns);
    step->set_compilation_ns(s.by_kind.compilation_ns);
    step->set_input_wait_ns(s.by_kind.input_wait_ns);
    for (const int64_t ns : s.type_ns) step->add_type_ns(ns);
    step->set_device_busy_ns(s.device_busy_ns);
    step->set_host_busy_ns(s.host_busy_ns);
  }
  const std::vector<TypedInterval> time_line = clip_to_windows(draft.segments, kept);
  for (const TypedInterval& segment : time_line) {
    db.add_segment_start_ns(segment.start_ns);
    db.add_segment_end_ns(segment.end_ns);
    db.add_segment_type(static_cast<int32_t>(segment.type));
  }
  if (draft.host_core && !kept.empty()) {
    *db.mutable_activity() = activity_of_time_line(time_line, kept.front().start_ns, kept.back().end_ns);
  }
  absl::flat_hash_map<int64_t, bool> kept_steps;
  for (const auto& step : db.steps()) kept_steps[step.step_num()] = true;
  for (CrossCoreEvent& e : draft.cross) {
    if (!e.step || !kept_steps.contains(*e.step)) continue;
    if (e.is_collective) {
      *db.add_collectives() = std::move(e.collective);
      continue;
    }
    const ChannelEndpoint& ep = e.endpoint;
    auto* out = db.add_channel_endpoints();
    out->set_is_send(ep.is_send);
    out->set_step_num(ep.step_num);
    out->set_channel_id(ep.channel_id);
    out->set_start_ns(ep.start_ns);
    out->set_end_ns(ep.end_ns);
    out->set_bytes(ep.bytes);
    out->set_name(ep.name);
    if (ep.src_core) out->set_src_core(*ep.src_core);
    if (ep.dst_core) out->set_dst_core(*ep.dst_core);
  }
}

}  // namespace

HostStepDatabase HostStepDatabaseBuilder::finish(const std::vector<std::string>& hostnames,
                                                 std::string_view file_stem) && {
  File& file = *file_;
  file.steps.add_file_names(hostnames, file_stem);
  for (const CoreDraft& core : file.cores) {
    if (core.db.has_host_name()) file.steps.add_device_plane_host(core.db.host_name());
  }
  for (CoreDraft& core : file.cores) {
    if (core.source == StepSource::kNone) file.take_steps_from_markers(core);
  }
  if (file.cores.empty() && !file.steps.host_markers().markers.empty()) file.add_host_core();
  add_streams_and_launches(file.cores, file.host.runtime_calls);
  const std::vector<TypedInterval> host_work = disjoint_by_priority(file.host.intervals);
  file.host = {.intervals = {}, .untyped = {}, .input_ops = std::move(file.host.input_ops), .runtime_calls = {}};

  HostStepDatabase db;
  db.set_host_name(file.steps.host_name());
  if (file.host_clock_offset_ns) {
    db.set_clock_offset_ns(*file.host_clock_offset_ns);
  } else if (file.device_clock_offset_ns) {
    db.set_clock_offset_ns(*file.device_clock_offset_ns);
  }
  if (file.steps.capture_start_ns()) db.set_capture_start_ns(*file.steps.capture_start_ns());
  if (file.steps.capture_end_ns()) db.set_capture_end_ns(*file.steps.capture_end_ns());
  for (CoreDraft& core : file.cores) {
    core.fill_gaps_with_host_work(host_work);
    keep_whole_steps(core, file.steps);
    *db.add_cores() = std::move(core.db);
  }
  add_input_ops(file.host.input_ops, *db.mutable_host_input_ops());
  return db;
}

HostStepDatabase build_host_step_database(const tensorflow::profiler::XSpace& space, std::string_view file_stem) {
  HostStepDatabaseBuilder builder;
  for (const auto& plane : space.planes()) builder.add_plane(plane);
  return std::move(builder).finish({space.hostnames().begin(), space.hostnames().end()}, file_stem);
}

void FileStepSpans::add_plane(const XPlane& plane) {
  if (device_plane_kind(plane.name())) {
    plane_clock_offsets_.push_back(XPlaneReader(plane).int_stat(xspace::kClockOffsetStat));
  }
  builder_.add_plane(plane);
}

void FileStepSpans::add_file_names(const std::vector<std::string>& hostnames, std::string_view file_stem) {
  hostnames_ = hostnames;
  file_stem_ = std::string(file_stem);
}

FileStepSpans::Result FileStepSpans::finish() && {
  const HostStepDatabase db = std::move(builder_).finish(hostnames_, file_stem_);
  Result result;
  result.host_name = db.host_name();
  if (db.has_capture_start_ns()) result.capture_start_ns = db.capture_start_ns();
  if (db.has_clock_offset_ns()) result.clock_offset_ns = db.clock_offset_ns();
  size_t device_plane = 0;
  for (const CoreStepDatabase& core : db.cores()) {
    if (core.kind() == podscope::v1::CORE_KIND_HOST) continue;
    PlaneSteps& plane = result.planes.emplace_back();
    plane.plane_name = core.plane_name();
    if (core.has_host_name()) plane.host_name = core.host_name();
    if (device_plane < plane_clock_offsets_.size()) plane.clock_offset_ns = plane_clock_offsets_[device_plane++];
    for (const auto& step : core.steps()) plane.steps.push_back({step.step_num(), step.start_ns(), step.end_ns()});
  }
  return result;
}

DeviceCapability device_capability(const podscope::v1::DeviceCapability& c) {
  return {.clock_rate_khz = c.clock_rate_khz(),
          .core_count = c.core_count(),
          .memory_bandwidth_bytes_per_s = c.memory_bandwidth_bytes_per_s(),
          .compute_cap_major = c.compute_cap_major(),
          .compute_cap_minor = c.compute_cap_minor()};
}

}  // namespace podscope::analysis
