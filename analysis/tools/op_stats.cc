#include "analysis/tools/op_stats.h"

#include <algorithm>
#include <cctype>
#include <tuple>

#include "analysis/tools/kernel_stats.h"
#include "analysis/steps/op_classifier.h"
#include "analysis/steps/step_events.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::TfStatsRecord;
using tensorflow::profiler::TfStatsTable;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XStat;
using xspace::XEventView;
using xspace::XPlaneReader;

// The stats that name the op of an event, newest first (TF's GPU tracer; older files: `level 0`, `annotation`), then
// the framework op named in full (PyTorch's, from a Kineto trace): the last one.
constexpr std::string_view kOpStatNames[] = {xspace::kTfOpStat, "level 0", "annotation", xspace::kFrameworkOpStat};
constexpr size_t kFrameworkOpStatIndex = std::size(kOpStatNames) - 1;
// Peaks some device planes state outright (XProf's device capability stats).
constexpr std::string_view kPeakTeraflopsStat = "peak_teraflops_per_second";
constexpr std::string_view kPeakHbmBandwidthStat = "peak_hbm_bw_gigabytes_per_second";
constexpr std::string_view kUnknownOpType = "unknown";
constexpr std::string_view kDeviceSide = "Device";
constexpr std::string_view kHostSide = "Host";
constexpr int64_t kAbsentStat = -1;

bool is_op_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-' || c == '>';
}

bool is_identifier(std::string_view text) {
  if (text.empty() || std::isdigit(static_cast<unsigned char>(text.front()))) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::optional<PlaneKind> device_kind_of(std::string_view plane_name) {
  if (plane_name.starts_with(xspace::kGpuPlanePrefix)) return PlaneKind::kGpu;
  if (plane_name.starts_with(xspace::kTpuPlanePrefix)) return PlaneKind::kTpu;
  if (plane_name.starts_with(xspace::kCustomPlanePrefix)) return PlaneKind::kCustom;
  return std::nullopt;
}

// An op stat's text as an op: an annotation's innermost op without its `#key=value#` suffix, then `name:Type`;
// text without a colon is an op name of unknown type. Nullopt when malformed.
std::optional<FrameworkOp> parse_op_stat(std::string_view text) {
  std::string_view op = text;
  if (const size_t nested = op.rfind("::"); nested != std::string_view::npos) op = op.substr(nested + 2);
  if (const size_t hash = op.find('#'); hash != std::string_view::npos) op = op.substr(0, hash);
  if (op.empty()) return std::nullopt;
  const size_t colon = op.rfind(':');
  if (colon == std::string_view::npos) return FrameworkOp{op, kUnknownOpType};
  FrameworkOp parsed{op.substr(0, colon), op.substr(colon + 1)};
  if (parsed.name.empty() || !is_identifier(parsed.type)) return std::nullopt;
  return parsed;
}

// A framework op named in full: its name as is, its type the namespace before its first `::` (`aten` for
// `aten::mm`), else unknown.
FrameworkOp parse_framework_op(std::string_view text) {
  const size_t nested = text.find("::");
  if (nested == std::string_view::npos || nested == 0) return FrameworkOp{text, kUnknownOpType};
  return FrameworkOp{text, text.substr(0, nested)};
}

// One op event of a line, for its self time.
struct OpSpan {
  int64_t start_ns;
  int64_t end_ns;
  size_t slot;
};

// Self time of the spans of one line: each span's duration minus the part of it the spans directly nested in it
// take. Sorted by start (the enclosing span first) when the writer did not.
template <typename AddSelf>  // void AddSelf(size_t slot, int64_t self_ns)
void add_self_times(std::vector<OpSpan>& spans, AddSelf&& add_self) {
  const auto outer_first = [](const OpSpan& a, const OpSpan& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  };
  if (!std::is_sorted(spans.begin(), spans.end(), outer_first)) std::sort(spans.begin(), spans.end(), outer_first);
  struct Open {
    int64_t end_ns;
    size_t index;
  };
  std::vector<Open> open;
  std::vector<int64_t> self(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    const OpSpan& s = spans[i];
    while (!open.empty() && open.back().end_ns <= s.start_ns) open.pop_back();
    self[i] = s.end_ns - s.start_ns;
    if (!open.empty()) self[open.back().index] -= std::min(s.end_ns, open.back().end_ns) - s.start_ns;
    open.push_back({s.end_ns, i});
  }
  for (size_t i = 0; i < spans.size(); ++i) add_self(spans[i].slot, self[i]);
}

// The union of the spans' lengths (spans in any order; reordered).
int64_t union_ns(std::vector<OpSpan>& spans) {
  std::sort(spans.begin(), spans.end(), [](const OpSpan& a, const OpSpan& b) { return a.start_ns < b.start_ns; });
  int64_t busy = 0;
  int64_t covered_to = INT64_MIN;
  for (const OpSpan& s : spans) {
    const int64_t from = std::max(s.start_ns, covered_to);
    if (s.end_ns > from) busy += s.end_ns - from;
    covered_to = std::max(covered_to, s.end_ns);
  }
  return busy;
}

double us(int64_t ns) { return static_cast<double>(ns) / 1e3; }

}  // namespace

std::optional<FrameworkOp> parse_tf_op_fullname(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  FrameworkOp op{text.substr(0, colon), text.substr(colon + 1)};
  if (!is_identifier(op.type) || !std::all_of(op.name.begin(), op.name.end(), is_op_name_char)) return std::nullopt;
  return op;
}

bool OpStatsBuilder::wants_line(std::string_view plane_name, std::string_view line_name) {
  if (plane_name == xspace::kHostPlaneName) return true;
  const std::optional<PlaneKind> kind = device_kind_of(plane_name);
  return kind && is_op_line(*kind, line_name);
}

size_t OpStatsBuilder::slot_of(bool device, std::string_view type, std::string_view name) {
  std::string key;
  key.reserve(type.size() + name.size() + 2);
  key.push_back(device ? 'd' : 'h');
  key.append(type);
  key.push_back('\0');
  key.append(name);
  auto [it, inserted] = slots_.try_emplace(std::move(key), ops_.size());
  if (inserted) ops_.push_back({device, std::string(type), std::string(name)});
  return it->second;
}

const OpStatsBuilder::StatOp& OpStatsBuilder::stat_op(bool device, std::string_view text, bool framework) {
  auto& cache = framework ? framework_stat_ops_[device] : device ? device_stat_ops_ : host_stat_ops_;
  if (auto it = cache.find(absl::string_view(text.data(), text.size())); it != cache.end()) return it->second;
  StatOp op;
  if (framework) {
    const FrameworkOp parsed = parse_framework_op(text);
    op.slot = slot_of(device, parsed.type, parsed.name);
  } else if (std::optional<FrameworkOp> parsed = parse_op_stat(text)) {
    op.slot = slot_of(device, parsed->type, parsed->name);
  } else {
    op.slot = slot_of(device, kUnknownOpType, text);
    op.malformed = true;
  }
  return cache.emplace(std::string(text), op).first->second;
}

void OpStatsBuilder::read_peaks(const XPlane& plane_proto) {
  if (peak_flops_per_s_ > 0 && peak_memory_bytes_per_s_ > 0) return;
  const XPlaneReader plane(plane_proto);
  const DeviceCapability capability = read_device_capability(plane);
  double flops = plane.double_stat(kPeakTeraflopsStat).value_or(0) * 1e12;
  if (flops <= 0) flops = capability.peak_flops_per_s();
  double bytes = plane.double_stat(kPeakHbmBandwidthStat).value_or(0) * 1e9;
  if (bytes <= 0) bytes = capability.memory_bandwidth_bytes_per_s;
  // Both from one plane, so that the ridge point is one device's.
  if (flops > 0 && bytes > 0) {
    peak_flops_per_s_ = flops;
    peak_memory_bytes_per_s_ = bytes;
  }
}

// One plane's pass: per event, its op (cached per event metadata and per op stat text), its FLOPs and bytes;
// per line, the self times.
class OpStatsBuilder::PlanePass final : public PlaneEventReader {
 public:
  PlanePass(OpStatsBuilder& builder, const XPlaneReader& plane, std::optional<PlaneKind> kind)
      : builder_(builder),
        plane_(plane),
        kind_(kind),
        device_(kind.has_value()),
        time_{std::string(plane.name()), device_} {
    for (size_t i = 0; i < std::size(kOpStatNames); ++i) {
      op_stat_ids_[i] = plane_.stat_id(kOpStatNames[i]).value_or(kAbsentStat);
    }
    flops_id_ = plane_.stat_id(xspace::kFlopsStat).value_or(kAbsentStat);
    bytes_accessed_id_ = plane_.stat_id(xspace::kBytesAccessedStat).value_or(kAbsentStat);
    bytes_id_ = plane_.stat_id(xspace::kBytesStat).value_or(kAbsentStat);
  }

  bool reads_line(const XLine& line) const override { return !device_ || is_op_line(*kind_, line.name()); }
  void begin_line(const XLine& line) override {
    line_spans_.clear();
    line_name_ = line.name();
  }
  void add_event(const XEventView& e) override {
    if (e.duration_ps() < 0) {
      ++builder_.warnings_.negative_durations;
      return;
    }
    const std::optional<size_t> slot = add_op(e, line_name_);
    if (!slot) return;
    line_spans_.push_back({e.start_ns(), e.end_ns(), *slot});
    first_start_ = std::min(first_start_, e.start_ns());
    last_end_ = std::max(last_end_, e.end_ns());
  }
  void end_line(const XLine&) override {
    time_.events += line_spans_.size();
    add_self_times(line_spans_, [&](size_t slot, int64_t self_ns) {
      builder_.ops_[slot].self_ns += self_ns;
      time_.self_ns += self_ns;
    });
    plane_spans_.insert(plane_spans_.end(), line_spans_.begin(), line_spans_.end());
  }

  PlaneOpTime finish() && {
    if (plane_spans_.empty()) return std::move(time_);
    time_.busy_ns = union_ns(plane_spans_);
    time_.span_ns = last_end_ - first_start_;
    return std::move(time_);
  }

 private:
  // An op stat's text and whether it is the framework op stat.
  struct OpText {
    std::string_view text;
    bool framework = false;
  };
  // What an event metadata says, read once per plane.
  struct MetadataOp {
    // The op the event is when it has no op stat of its own (nullopt: none), its slot taken at its first use.
    std::optional<FrameworkOp> op;
    std::optional<size_t> slot;
    std::optional<OpText> op_stat;
    const XStat* flops = nullptr;
    const XStat* bytes = nullptr;
    bool tensor_core = false;
  };
  // The stats of one event, in one pass over them.
  struct EventStats {
    const XStat* op[std::size(kOpStatNames)] = {};
    const XStat* flops = nullptr;
    const XStat* bytes = nullptr;
  };

  EventStats stats_of(const google::protobuf::RepeatedPtrField<XStat>& stats) const {
    EventStats found;
    for (const XStat& stat : stats) {
      const int64_t id = static_cast<int64_t>(stat.metadata_id());
      for (size_t i = 0; i < std::size(kOpStatNames); ++i) {
        if (id == op_stat_ids_[i] && !found.op[i]) found.op[i] = &stat;
      }
      if (id == flops_id_ && !found.flops) found.flops = &stat;
      if (id == bytes_accessed_id_ || (id == bytes_id_ && !found.bytes)) found.bytes = &stat;
    }
    return found;
  }

  // The text of an op stat, unless it names no op: empty, or only `#key=value#` (TF's copies of a function's
  // results).
  std::optional<std::string_view> op_text(const XStat* stat) const {
    if (!stat) return std::nullopt;
    std::optional<std::string_view> text = plane_.str_of(stat);
    if (!text || text->empty() || text->front() == '#') return std::nullopt;
    return text;
  }
  // The first op stat that names an op.
  std::optional<OpText> op_text(const EventStats& stats) const {
    for (size_t i = 0; i < std::size(kOpStatNames); ++i) {
      if (auto text = op_text(stats.op[i])) return OpText{*text, i == kFrameworkOpStatIndex};
    }
    return std::nullopt;
  }

  MetadataOp& metadata_op(const XEventView& e, std::string_view line_name) {
    auto [it, created] = metadata_.try_emplace(e.proto().metadata_id());
    MetadataOp& m = it->second;
    if (!created) return m;
    const std::string_view name = e.name();
    if (const auto* metadata = plane_.event_metadata(e.proto().metadata_id())) {
      const EventStats stats = stats_of(metadata->stats());
      m.op_stat = op_text(stats);
      m.flops = stats.flops;
      m.bytes = stats.bytes;
    }
    if (!device_) {
      m.op = parse_tf_op_fullname(name);
      return m;
    }
    if (*kind_ == PlaneKind::kCustom) {
      const bool has_flops = m.flops && xspace::stat_as_double(*m.flops).value_or(0) > 0;
      m.op = FrameworkOp{name, op_kind_name(classify_op(name, line_name, has_flops))};
    } else {
      m.op = FrameworkOp{name, kUnknownOpType};
    }
    m.tensor_core = *kind_ == PlaneKind::kGpu && kernel_name_suggests_tensor_core(name);
    return m;
  }

  // Adds the event to its op's totals; the op's slot, or nullopt when the event is no op.
  std::optional<size_t> add_op(const XEventView& e, std::string_view line_name) {
    MetadataOp& m = metadata_op(e, line_name);
    const EventStats stats = stats_of(e.proto().stats());
    std::optional<size_t> slot;
    std::optional<OpText> text = op_text(stats);
    if (!text) text = m.op_stat;
    if (text) {
      const StatOp& op = builder_.stat_op(device_, text->text, text->framework);
      if (op.malformed) ++builder_.warnings_.malformed_op_stats;
      if (device_ && *kind_ != PlaneKind::kCustom) ++builder_.warnings_.device_events_with_op;
      slot = op.slot;
    } else if (m.op) {
      if (!m.slot) m.slot = builder_.slot_of(device_, m.op->type, m.op->name);
      slot = m.slot;
      if (device_ && *kind_ != PlaneKind::kCustom) ++builder_.warnings_.device_events_without_op;
    }
    if (!slot) return std::nullopt;
    OpTotals& op = builder_.ops_[*slot];
    const int64_t duration = e.end_ns() - e.start_ns();
    ++op.occurrences;
    op.total_ns += duration;
    if (const XStat* flops = stats.flops ? stats.flops : m.flops)
      op.flops += xspace::stat_as_double(*flops).value_or(0);
    if (const XStat* bytes = stats.bytes ? stats.bytes : m.bytes)
      op.bytes += xspace::stat_as_double(*bytes).value_or(0);
    if (m.tensor_core) op.tensor_core_ns += duration;
    return slot;
  }

  OpStatsBuilder& builder_;
  const XPlaneReader& plane_;
  const std::optional<PlaneKind> kind_;
  const bool device_;
  PlaneOpTime time_;
  std::string_view line_name_;  // of the line being read
  std::vector<OpSpan> line_spans_;
  std::vector<OpSpan> plane_spans_;
  int64_t first_start_ = INT64_MAX;
  int64_t last_end_ = INT64_MIN;
  int64_t op_stat_ids_[std::size(kOpStatNames)] = {};
  int64_t flops_id_ = kAbsentStat;
  int64_t bytes_accessed_id_ = kAbsentStat;
  int64_t bytes_id_ = kAbsentStat;
  absl::flat_hash_map<int64_t, MetadataOp> metadata_;
};

OpStatsBuilder::OpStatsBuilder() = default;
OpStatsBuilder::~OpStatsBuilder() = default;

void OpStatsBuilder::begin_plane(size_t, const XPlaneReader& plane, std::vector<PlaneEventReader*>& readers) {
  const std::optional<PlaneKind> kind = device_kind_of(plane.name());
  if (!kind && plane.name() != xspace::kHostPlaneName) return;
  if (kind) {
    read_peaks(plane.proto());
    if (device_type_.empty()) {
      device_type_ = *kind == PlaneKind::kGpu ? "GPU" : *kind == PlaneKind::kTpu ? "TPU" : "CUSTOM";
    }
  }
  pass_ = std::make_unique<PlanePass>(*this, plane, kind);
  readers.push_back(pass_.get());
}

void OpStatsBuilder::end_plane(size_t) {
  if (!pass_) return;
  planes_.push_back(std::move(*pass_).finish());
  pass_.reset();
}

namespace {

// The bound of an op by the roofline: compute when its FLOPs per byte reach the device's ridge point.
std::string_view bound_by(double flops, double bytes, double peak_flops_per_s, double peak_bytes_per_s) {
  if (peak_flops_per_s <= 0 || peak_bytes_per_s <= 0 || bytes <= 0) return kUnknownOpType;
  return flops / bytes >= peak_flops_per_s / peak_bytes_per_s ? "Compute" : "Memory";
}

}  // namespace

podscope::v1::OpStatsPart OpStatsBuilder::take_part() && {
  podscope::v1::OpStatsPart part;
  std::vector<const OpTotals*> ops;
  ops.reserve(ops_.size());
  for (const OpTotals& op : ops_) ops.push_back(&op);
  std::sort(ops.begin(), ops.end(), [](const OpTotals* a, const OpTotals* b) {
    return std::tie(a->device, a->type, a->name) < std::tie(b->device, b->type, b->name);
  });
  for (const OpTotals* op : ops) {
    auto* out = part.add_ops();
    out->set_device(op->device);
    out->set_type(op->type);
    out->set_name(op->name);
    out->set_occurrences(op->occurrences);
    out->set_total_ns(op->total_ns);
    out->set_self_ns(op->self_ns);
    out->set_flops(op->flops);
    out->set_bytes(op->bytes);
    out->set_tensor_core_ns(op->tensor_core_ns);
  }
  for (const PlaneOpTime& plane : planes_) {
    auto* out = part.add_planes();
    out->set_plane(plane.plane);
    out->set_device(plane.device);
    out->set_events(plane.events);
    out->set_self_ns(plane.self_ns);
    out->set_busy_ns(plane.busy_ns);
    out->set_span_ns(plane.span_ns);
  }
  part.set_negative_durations(warnings_.negative_durations);
  part.set_malformed_op_stats(warnings_.malformed_op_stats);
  part.set_device_events_without_op(warnings_.device_events_without_op);
  part.set_device_events_with_op(warnings_.device_events_with_op);
  part.set_device_type(device_type_);
  part.set_peak_flops_per_s(peak_flops_per_s_);
  part.set_peak_memory_bytes_per_s(peak_memory_bytes_per_s_);
  return part;
}

void OpStatsBuilder::add_part(size_t, const podscope::v1::OpStatsPart& part) {
  for (const auto& in : part.ops()) {
    OpTotals& op = ops_[slot_of(in.device(), in.type(), in.name())];
    op.occurrences += in.occurrences();
    op.total_ns += in.total_ns();
    op.self_ns += in.self_ns();
    op.flops += in.flops();
    op.bytes += in.bytes();
    op.tensor_core_ns += in.tensor_core_ns();
  }
  for (const auto& in : part.planes()) {
    planes_.push_back({in.plane(), in.device(), in.events(), in.self_ns(), in.busy_ns(), in.span_ns()});
  }
  warnings_.negative_durations += part.negative_durations();
  warnings_.malformed_op_stats += part.malformed_op_stats();
  warnings_.device_events_without_op += part.device_events_without_op();
  warnings_.device_events_with_op += part.device_events_with_op();
  if (device_type_.empty()) device_type_ = part.device_type();
  // Both peaks from one host's device, so that the ridge point is one device's.
  if (!(peak_flops_per_s_ > 0 && peak_memory_bytes_per_s_ > 0) && part.peak_flops_per_s() > 0 &&
      part.peak_memory_bytes_per_s() > 0) {
    peak_flops_per_s_ = part.peak_flops_per_s();
    peak_memory_bytes_per_s_ = part.peak_memory_bytes_per_s();
  }
}

OpStatsResult OpStatsBuilder::finish(size_t max_records_per_side) && {
  OpStatsResult result;
  result.warnings = warnings_;
  result.peak_flops_per_s = peak_flops_per_s_;
  result.peak_memory_bytes_per_s = peak_memory_bytes_per_s_;
  sum_sides(result);
  const size_t first_idle = add_idle_rows(result);
  fill_tables(result, first_idle, max_records_per_side);
  result.db.set_device_type(device_type_);
  result.planes = std::move(planes_);
  return result;
}

void OpStatsBuilder::sum_sides(OpStatsResult& result) const {
  for (const PlaneOpTime& p : planes_) {
    (p.device ? result.device_idle_ns : result.host_idle_ns) += p.span_ns - p.busy_ns;
  }
  for (const OpTotals& op : ops_) (op.device ? result.device_self_ns : result.host_self_ns) += op.self_ns;
}

size_t OpStatsBuilder::add_idle_rows(const OpStatsResult& result) {
  // One per side that had ops, sorted among the others by their time.
  const size_t first_idle = ops_.size();
  for (bool device : {true, false}) {
    const int64_t idle = device ? result.device_idle_ns : result.host_idle_ns;
    const int64_t self = device ? result.device_self_ns : result.host_self_ns;
    if (idle <= 0 && self <= 0) continue;
    OpTotals row{device, std::string(kIdleOpName), std::string(kIdleOpName)};
    row.total_ns = row.self_ns = idle;
    ops_.push_back(std::move(row));
  }
  return first_idle;
}

std::vector<size_t> OpStatsBuilder::rank_order() const {
  std::vector<size_t> order(ops_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto device_first_longest_first = [this](size_t a, size_t b) {
    const OpTotals& x = ops_[a];
    const OpTotals& y = ops_[b];
    return std::make_tuple(!x.device, -x.self_ns, std::string_view(x.type), std::string_view(x.name)) <
           std::make_tuple(!y.device, -y.self_ns, std::string_view(y.type), std::string_view(y.name));
  };
  std::sort(order.begin(), order.end(), device_first_longest_first);
  return order;
}

void OpStatsBuilder::fill_tables(OpStatsResult& result, size_t first_idle, size_t max_records_per_side) const {
  TfStatsTable& with_idle = *result.db.mutable_with_idle();
  TfStatsTable& without_idle = *result.db.mutable_without_idle();
  size_t kept[2] = {0, 0};  // host, device
  uint64_t cut[2] = {0, 0};
  double cumulative_with_idle = 0, cumulative_without_idle = 0;
  bool device_side = true;  // the side of the rows so far: the device's come first
  for (const size_t i : rank_order()) {
    const OpTotals& op = ops_[i];
    const bool idle_row = i >= first_idle;
    if (op.device != device_side) {
      device_side = op.device;
      cumulative_with_idle = cumulative_without_idle = 0;
    }
    if (!idle_row && kept[op.device] >= max_records_per_side) {
      ++cut[op.device];
      continue;
    }
    if (!idle_row) ++kept[op.device];
    const int64_t side_self = op.device ? result.device_self_ns : result.host_self_ns;
    const int64_t side_idle = op.device ? result.device_idle_ns : result.host_idle_ns;
    const int64_t with_idle_total = side_self + side_idle;
    add_record(with_idle, op, idle_row,
               with_idle_total > 0 ? static_cast<double>(op.self_ns) / static_cast<double>(with_idle_total) : 0,
               cumulative_with_idle);
    if (!idle_row) {
      add_record(without_idle, op, idle_row,
                 side_self > 0 ? static_cast<double>(op.self_ns) / static_cast<double>(side_self) : 0,
                 cumulative_without_idle);
    }
  }
  result.db.set_device_records_cut(cut[1]);
  result.db.set_host_records_cut(cut[0]);
}

void OpStatsBuilder::add_record(TfStatsTable& table, const OpTotals& op, bool idle_row, double fraction,
                                double& cumulative) const {
  TfStatsRecord& r = *table.add_tf_stats_record();
  r.set_rank(static_cast<uint64_t>(table.tf_stats_record_size()));
  r.set_host_or_device(std::string(op.device ? kDeviceSide : kHostSide));
  r.set_op_type(op.type);
  r.set_op_name(op.name);
  r.set_occurrences(static_cast<int64_t>(op.occurrences));
  r.set_total_time_in_us(us(op.total_ns));
  r.set_total_self_time_in_us(us(op.self_ns));
  if (op.occurrences > 0) {
    r.set_avg_time_in_us(us(op.total_ns) / static_cast<double>(op.occurrences));
    r.set_avg_self_time_in_us(us(op.self_ns) / static_cast<double>(op.occurrences));
  }
  cumulative += fraction;
  if (op.device) {
    r.set_device_total_self_time_as_fraction(fraction);
    r.set_device_cumulative_total_self_time_as_fraction(cumulative);
  } else {
    r.set_host_total_self_time_as_fraction(fraction);
    r.set_host_cumulative_total_self_time_as_fraction(cumulative);
  }
  if (op.total_ns > 0) {
    const double seconds = static_cast<double>(op.total_ns) / 1e9;
    r.set_measured_flop_rate(op.flops / seconds / 1e9);
    r.set_model_flop_rate(op.flops / seconds / 1e9);
    r.set_measured_memory_bw(op.bytes / seconds / (1 << 30));
    r.set_gpu_tensorcore_utilization(static_cast<double>(op.tensor_core_ns) / static_cast<double>(op.total_ns));
  }
  if (op.bytes > 0) r.set_operational_intensity(op.flops / op.bytes);
  r.set_bound_by(std::string(op.device && !idle_row
                                 ? bound_by(op.flops, op.bytes, peak_flops_per_s_, peak_memory_bytes_per_s_)
                                 : kUnknownOpType));
  r.set_flops_v2(op.flops);
  r.set_bytes_accessed(static_cast<uint64_t>(std::max(0.0, op.bytes)));
}

OpStatsResult xspace_to_op_stats(const tensorflow::profiler::XSpace& space) {
  OpStatsBuilder builder;
  for (const XPlane& plane : space.planes()) builder.add_plane(plane);
  return std::move(builder).finish();
}

}  // namespace podscope::analysis
