#include "analysis/tools/memory_profile.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::analysis {
namespace {

using xspace::kAddressStat;
using xspace::kAllocationBytesStat;
using xspace::kAllocatorNameStat;
using xspace::kBytesAllocatedStat;
using xspace::kBytesReservedStat;
using xspace::kMemoryAllocationEventName;
using xspace::kMemoryDeallocationEventName;
using xspace::kPeakBytesInUseStat;
using xspace::kRequestedBytesStat;
using xspace::kTfOpStat;

using tensorflow::profiler::ActiveAllocation;
using tensorflow::profiler::MemoryActivityMetadata;
using tensorflow::profiler::MemoryAggregationStats;
using tensorflow::profiler::MemoryProfile;
using tensorflow::profiler::MemoryProfileSnapshot;
using tensorflow::profiler::PerAllocatorMemoryProfile;
using xspace::XEventView;

// TensorFlow's allocator stats that only the analysis reads (xplane_schema; older files write the step as `id`).
constexpr std::string_view kBytesAvailableStat = "bytes_available";
constexpr std::string_view kFragmentationStat = "fragmentation";
constexpr std::string_view kRegionTypeStat = "region_type";
constexpr std::string_view kDataTypeStat = "data_type";
constexpr std::string_view kTensorShapeStat = "shape";
constexpr std::string_view kOldStepIdStat = "id";

// What XProf names the rows of memory that no allocation event in the window accounts for.
constexpr std::string_view kPreallocatedRowName = "unused preallocated device memory";
constexpr std::string_view kStackRowName = "stack";

// TensorFlow's DataType enum values (types.proto) by the names its DataTypeString gives them.
std::string_view data_type_name(int64_t value) {
  static constexpr std::string_view kNames[] = {"INVALID",    "float",  "double",    "int32",   "uint8",   "int16",
                                                "int8",       "string", "complex64", "int64",   "bool",    "qint8",
                                                "quint8",     "qint32", "bfloat16",  "qint16",  "quint16", "uint16",
                                                "complex128", "half",   "resource",  "variant", "uint32",  "uint64"};
  if (value < 0 || value >= static_cast<int64_t>(std::size(kNames))) return "unknown";
  return kNames[value];
}

// A row of the peak table: identical allocations (same sizes, op, region, type and shape) are one row.

MemoryActivityMetadata special_row(std::string_view name, std::string_view region, int64_t bytes, int64_t step) {
  MemoryActivityMetadata m;
  m.set_memory_activity(tensorflow::profiler::ALLOCATION);
  m.set_requested_bytes(bytes);
  m.set_allocation_bytes(bytes);
  m.set_tf_op_name(std::string(name));
  m.set_step_id(step);
  m.set_region_type(std::string(region));
  m.set_data_type(std::string(data_type_name(0)));
  m.set_tensor_shape("unknown");
  return m;
}

// The timeline's points among `n` activities: at most `max_points`, each the largest (stack + heap, `in_use(i)`)
// of a run of consecutive ones; the runs differ in length by at most one.
template <typename InUse>
std::vector<size_t> timeline_points(size_t n, size_t max_points, InUse&& in_use) {
  std::vector<size_t> points;
  if (n <= max_points) {
    points.resize(n);
    std::iota(points.begin(), points.end(), size_t{0});
    return points;
  }
  points.reserve(max_points);
  for (size_t bucket = 0; bucket < max_points; ++bucket) {
    const size_t begin = bucket * n / max_points;
    const size_t end = (bucket + 1) * n / max_points;
    size_t best = begin;
    for (size_t i = begin + 1; i < end; ++i) {
      if (in_use(i) > in_use(best)) best = i;
    }
    points.push_back(best);
  }
  return points;
}

}  // namespace

bool MemoryProfileBuilder::wants_line(std::string_view plane_name, std::string_view) {
  return plane_name == xspace::kHostPlaneName;
}

uint32_t MemoryProfileBuilder::intern(std::string_view text) {
  if (const auto it = string_ids_.find(absl::string_view(text.data(), text.size())); it != string_ids_.end()) {
    return it->second;
  }
  const auto id = static_cast<uint32_t>(strings_.size());
  string_ids_.emplace(std::string(text), id);
  strings_.emplace_back(text);
  return id;
}

namespace {

// The stats an allocator event is read for.
enum AllocatorStat {
  kAllocatorName,
  kAllocated,
  kReserved,
  kAvailable,
  kFragmentation,
  kPeakInUse,
  kRequested,
  kAllocationBytes,
  kAddress,
  kGroupId,
  kOldStepId,
  kTfOp,
  kRegionType,
  kDataType,
  kTensorShape,
  kAllocatorStatCount
};
constexpr std::string_view kAllocatorStatNames[kAllocatorStatCount] = {
    kAllocatorNameStat,  kBytesAllocatedStat, kBytesReservedStat,   kBytesAvailableStat, kFragmentationStat,
    kPeakBytesInUseStat, kRequestedBytesStat, kAllocationBytesStat, kAddressStat,        xspace::kGroupIdStat,
    kOldStepIdStat,      kTfOpStat,           kRegionTypeStat,      kDataTypeStat,       kTensorShapeStat};

// An allocator event's stats, found in one pass over the event's own and one over its metadata's (an event's own
// stat takes precedence), by the ids the plane gives their names: no name looked up per event.
class AllocatorStats {
 public:
  explicit AllocatorStats(const xspace::XPlaneReader& plane) : plane_(plane) {
    for (size_t i = 0; i < kAllocatorStatCount; ++i) ids_[i] = plane.stat_id(kAllocatorStatNames[i]);
  }

  void read(const XEventView& e) {
    found_.fill(nullptr);
    collect(e.proto().stats());
    if (const auto* metadata = plane_.event_metadata(e.proto().metadata_id())) collect(metadata->stats());
  }

  std::optional<int64_t> int_of(AllocatorStat s) const {
    return found_[s] ? xspace::stat_as_int(*found_[s]) : std::nullopt;
  }
  std::optional<double> double_of(AllocatorStat s) const {
    return found_[s] ? xspace::stat_as_double(*found_[s]) : std::nullopt;
  }
  std::optional<std::string_view> str_of(AllocatorStat s) const { return plane_.str_of(found_[s]); }

 private:
  void collect(const google::protobuf::RepeatedPtrField<tensorflow::profiler::XStat>& stats) {
    for (const auto& stat : stats) {
      for (size_t i = 0; i < kAllocatorStatCount; ++i) {
        if (!found_[i] && ids_[i] == stat.metadata_id()) found_[i] = &stat;
      }
    }
  }

  const xspace::XPlaneReader& plane_;
  std::array<std::optional<int64_t>, kAllocatorStatCount> ids_;
  std::array<const tensorflow::profiler::XStat*, kAllocatorStatCount> found_{};
};

}  // namespace

class MemoryProfileBuilder::PlaneReader final : public PlaneEventReader {
 public:
  PlaneReader(MemoryProfileBuilder& builder, size_t file_index, const xspace::XPlaneReader& plane,
              std::optional<int64_t> allocation_id, std::optional<int64_t> deallocation_id)
      : builder_(builder),
        file_index_(file_index),
        allocation_id_(allocation_id),
        deallocation_id_(deallocation_id),
        clock_offset_ns_(plane.int_stat(xspace::kClockOffsetStat).value_or(0)),
        stats_(plane) {}

  bool reads_line(const tensorflow::profiler::XLine&) const override { return true; }
  void add_event(const XEventView& e) override {
    const int64_t md = e.proto().metadata_id();
    if (md != allocation_id_ && md != deallocation_id_) return;
    ++builder_.events_;
    stats_.read(e);
    const std::optional<std::string_view> allocator = stats_.str_of(kAllocatorName);
    const std::optional<int64_t> allocated = stats_.int_of(kAllocated);
    if (!allocator || allocator->empty() || !allocated) {
      ++builder_.warnings_.events_missing_stats;
      return;
    }
    Activity a;
    a.time_ns = e.start_ns() - clock_offset_ns_;
    a.allocation = md == allocation_id_;
    a.bytes_allocated = *allocated;
    a.bytes_reserved = stats_.int_of(kReserved).value_or(0);
    a.bytes_available = stats_.int_of(kAvailable).value_or(0);
    a.fragmentation = stats_.double_of(kFragmentation).value_or(0);
    a.peak_bytes_in_use = stats_.int_of(kPeakInUse).value_or(0);
    a.requested_bytes = stats_.int_of(kRequested).value_or(0);
    a.allocation_bytes = stats_.int_of(kAllocationBytes).value_or(0);
    a.address = static_cast<uint64_t>(stats_.int_of(kAddress).value_or(0));
    a.step_id = stats_.int_of(kGroupId).value_or(stats_.int_of(kOldStepId).value_or(-1));
    a.op = intern(op_, stats_.str_of(kTfOp).value_or(""));
    a.region_type = intern(region_type_, stats_.str_of(kRegionType).value_or(""));
    if (auto type = stats_.int_of(kDataType)) {
      a.data_type = intern(data_type_, data_type_name(*type));
    } else {
      a.data_type = intern(data_type_, stats_.str_of(kDataType).value_or(""));
    }
    a.tensor_shape = intern(tensor_shape_, stats_.str_of(kTensorShape).value_or(""));
    if (last_ == nullptr || last_->file_index != file_index_ || last_->name != *allocator) {
      last_ = &builder_.allocators_[{file_index_, std::string(*allocator)}];
      if (last_->name.empty()) {
        last_->name = std::string(*allocator);
        last_->file_index = file_index_;
      }
    }
    last_->activities.push_back(a);
  }

 private:
  MemoryProfileBuilder& builder_;
  const size_t file_index_;
  const std::optional<int64_t> allocation_id_;
  const std::optional<int64_t> deallocation_id_;
  const int64_t clock_offset_ns_;
  // The last text of a field and its interned id.
  struct LastText {
    const char* data = nullptr;
    size_t size = 0;
    uint32_t id = 0;
    bool known = false;
  };

  // A field's text interned, looked up only when it is not the very text of the event before: most are the name a
  // ref_value stat points at, the same view from event to event.
  uint32_t intern(LastText& last, std::string_view text) {
    if (!last.known || text.data() != last.data || text.size() != last.size) {
      last = {text.data(), text.size(), builder_.intern(text), true};
    }
    return last.id;
  }

  AllocatorStats stats_;
  // The allocator of the previous event: consecutive events are mostly of one allocator.
  Allocator* last_ = nullptr;
  LastText op_, region_type_, data_type_, tensor_shape_;
};

MemoryProfileBuilder::MemoryProfileBuilder() = default;
MemoryProfileBuilder::~MemoryProfileBuilder() = default;

void MemoryProfileBuilder::begin_plane(size_t file_index, const xspace::XPlaneReader& plane,
                                       std::vector<PlaneEventReader*>& readers) {
  std::optional<int64_t> allocation_id, deallocation_id;
  for (const auto& [id, md] : plane.proto().event_metadata()) {
    if (md.name() == kMemoryAllocationEventName) allocation_id = id;
    if (md.name() == kMemoryDeallocationEventName) deallocation_id = id;
  }
  if (!allocation_id && !deallocation_id) return;
  if (auto host = plane.str_stat(xspace::kHostNameStat)) host_names_[file_index] = std::string(*host);
  if (auto offset = plane.int_stat(xspace::kClockOffsetStat)) stated_offsets_.emplace(file_index, *offset);
  plane_reader_ = std::make_unique<PlaneReader>(*this, file_index, plane, allocation_id, deallocation_id);
  readers.push_back(plane_reader_.get());
}

void MemoryProfileBuilder::end_plane(size_t) { plane_reader_.reset(); }

MemoryActivityMetadata MemoryProfileBuilder::metadata_of(const Activity& a) const {
  MemoryActivityMetadata m;
  m.set_memory_activity(a.allocation ? tensorflow::profiler::ALLOCATION : tensorflow::profiler::DEALLOCATION);
  m.set_requested_bytes(a.requested_bytes);
  m.set_allocation_bytes(a.allocation_bytes);
  m.set_address(a.address);
  m.set_tf_op_name(strings_[a.op]);
  m.set_step_id(a.step_id);
  m.set_region_type(strings_[a.region_type]);
  m.set_data_type(strings_[a.data_type]);
  m.set_tensor_shape(strings_[a.tensor_shape]);
  return m;
}

PerAllocatorMemoryProfile MemoryProfileBuilder::profile_of(Allocator& allocator, int64_t origin_ns,
                                                           size_t max_timeline_points) {
  std::vector<Activity>& acts = allocator.activities;
  // An allocator's events are mostly in time order already (a client's come from one line); stable_sort would
  // copy them all through a buffer of their size even then.
  auto by_time = [](const Activity& a, const Activity& b) { return a.time_ns < b.time_ns; };
  if (!std::is_sorted(acts.begin(), acts.end(), by_time)) std::stable_sort(acts.begin(), acts.end(), by_time);
  const Peaks peaks = complete_activities(acts);
  PerAllocatorMemoryProfile profile;
  summarize_peak(acts, peaks, origin_ns, profile);
  add_active_allocations(rows_live_at_peak(acts, peaks.window_peak, profile), acts, origin_ns, profile);
  // Snapshots made for the points shown only.
  for (const size_t i : timeline_points(acts.size(), max_timeline_points,
                                        [&](size_t i) { return acts[i].bytes_reserved + acts[i].bytes_allocated; })) {
    *profile.add_sampled_timeline_snapshots() = snapshot_of(acts[i], origin_ns);
  }
  return profile;
}

MemoryProfileBuilder::Peaks MemoryProfileBuilder::complete_activities(std::vector<Activity>& acts) {
  absl::flat_hash_map<uint64_t, size_t> live;  // address → index of its allocation
  int64_t last_step = -1;
  Peaks peaks;
  for (size_t i = 0; i < acts.size(); ++i) {
    Activity& a = acts[i];
    if (a.step_id < 0) {
      a.step_id = last_step + 1;
    } else {
      last_step = a.step_id;
    }
    if (a.allocation) {
      if (!live.try_emplace(a.address, i).second) {
        ++warnings_.reused_live_addresses;
        live[a.address] = i;
      }
    } else if (auto it = live.find(a.address); it != live.end()) {
      const Activity& alloc = acts[it->second];
      a.op = alloc.op;
      a.region_type = alloc.region_type;
      a.data_type = alloc.data_type;
      a.tensor_shape = alloc.tensor_shape;
      live.erase(it);
    } else {
      ++freed_from_before_.frees;
      freed_from_before_.bytes += a.allocation_bytes;
    }
    const Activity& peak = acts[peaks.window_peak];
    if (a.bytes_reserved + a.bytes_allocated >= peak.bytes_reserved + peak.bytes_allocated) peaks.window_peak = i;
    peaks.lifetime_peak_bytes = std::max(peaks.lifetime_peak_bytes, a.peak_bytes_in_use);
  }
  return peaks;
}

MemoryProfileSnapshot MemoryProfileBuilder::snapshot_of(const Activity& a, int64_t origin_ns) const {
  MemoryProfileSnapshot s;
  s.set_time_offset_ps((a.time_ns - origin_ns) * 1000);
  MemoryAggregationStats& stats = *s.mutable_aggregation_stats();
  stats.set_stack_reserved_bytes(a.bytes_reserved);
  stats.set_heap_allocated_bytes(a.bytes_allocated);
  stats.set_free_memory_bytes(a.bytes_available);
  stats.set_fragmentation(a.fragmentation);
  stats.set_peak_bytes_in_use(a.peak_bytes_in_use);
  *s.mutable_activity_metadata() = metadata_of(a);
  return s;
}

void MemoryProfileBuilder::summarize_peak(const std::vector<Activity>& acts, const Peaks& peaks, int64_t origin_ns,
                                          PerAllocatorMemoryProfile& profile) const {
  const Activity& at_peak = acts[peaks.window_peak];
  auto& summary = *profile.mutable_profile_summary();
  summary.set_peak_bytes_usage_lifetime(peaks.lifetime_peak_bytes);
  *summary.mutable_peak_stats() = snapshot_of(at_peak, origin_ns).aggregation_stats();
  summary.mutable_peak_stats()->set_peak_bytes_in_use(at_peak.bytes_reserved + at_peak.bytes_allocated);
  summary.set_peak_stats_time_ps((at_peak.time_ns - origin_ns) * 1000);
  summary.set_memory_capacity(at_peak.bytes_reserved + at_peak.bytes_allocated + at_peak.bytes_available);
}

std::vector<MemoryProfileBuilder::PeakRow> MemoryProfileBuilder::rows_live_at_peak(
    const std::vector<Activity>& acts, size_t peak, PerAllocatorMemoryProfile& profile) const {
  absl::flat_hash_map<uint64_t, size_t> live;  // address → index of its allocation
  for (size_t i = 0; i <= peak; ++i) {
    if (acts[i].allocation) {
      live[acts[i].address] = i;
    } else {
      live.erase(acts[i].address);
    }
  }
  const Activity& at_peak = acts[peak];
  std::vector<PeakRow> rows;
  int64_t live_bytes = 0;
  for (const auto& [address, index] : live) {
    rows.push_back({static_cast<int64_t>(index), -1, metadata_of(acts[index])});
    live_bytes += acts[index].allocation_bytes;
  }
  if (const int64_t unaccounted = at_peak.bytes_allocated - live_bytes; unaccounted > 0) {
    *profile.add_special_allocations() =
        special_row(kPreallocatedRowName, "persist/dynamic", unaccounted, at_peak.step_id);
  }
  if (at_peak.bytes_reserved > 0) {
    *profile.add_special_allocations() = special_row(kStackRowName, "stack", at_peak.bytes_reserved, at_peak.step_id);
  }
  for (int i = 0; i < profile.special_allocations_size(); ++i) {
    rows.push_back({-1, i, profile.special_allocations(i)});
  }
  // Among equal rows the earliest allocation stands for them, whatever order the live set gave them in.
  std::sort(rows.begin(), rows.end(), [](const PeakRow& a, const PeakRow& b) {
    return std::tuple_cat(a.sort_key(), std::tie(a.snapshot_index, a.special_index)) <
           std::tuple_cat(b.sort_key(), std::tie(b.snapshot_index, b.special_index));
  });
  return rows;
}

void MemoryProfileBuilder::add_active_allocations(const std::vector<PeakRow>& rows, const std::vector<Activity>& acts,
                                                  int64_t origin_ns, PerAllocatorMemoryProfile& profile) const {
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j].snapshot_index >= 0 && rows[i].snapshot_index >= 0 &&
           rows[j].sort_key() == rows[i].sort_key()) {
      ++j;
    }
    ActiveAllocation& row = *profile.add_active_allocations();
    if (rows[i].snapshot_index >= 0) {
      row.set_snapshot_index(profile.memory_profile_snapshots_size());
      row.set_special_index(-1);
      *profile.add_memory_profile_snapshots() =
          snapshot_of(acts[static_cast<size_t>(rows[i].snapshot_index)], origin_ns);
    } else {
      row.set_snapshot_index(-1);
      row.set_special_index(rows[i].special_index);
    }
    row.set_num_occurrences(static_cast<int64_t>(j - i));
    i = j;
  }
}

podscope::v1::MemoryPart MemoryProfileBuilder::take_part() && {
  podscope::v1::MemoryPart part;
  for (const std::string& text : strings_) part.add_strings(text);
  if (auto host = host_names_.find(0); host != host_names_.end()) part.set_host_name(host->second);
  if (auto offset = stated_offsets_.find(0); offset != stated_offsets_.end()) part.set_clock_offset_ns(offset->second);
  part.set_events(events_);
  part.set_events_missing_stats(warnings_.events_missing_stats);
  for (auto& [source, allocator] : allocators_) {
    auto& out = *part.add_allocators();
    out.set_name(source.allocator);
    for (const Activity& a : allocator.activities) {
      out.add_time_ns(a.time_ns);
      out.add_allocation(a.allocation);
      out.add_bytes_reserved(a.bytes_reserved);
      out.add_bytes_allocated(a.bytes_allocated);
      out.add_bytes_available(a.bytes_available);
      out.add_fragmentation(a.fragmentation);
      out.add_peak_bytes_in_use(a.peak_bytes_in_use);
      out.add_requested_bytes(a.requested_bytes);
      out.add_allocation_bytes(a.allocation_bytes);
      out.add_address(a.address);
      out.add_step_id(a.step_id);
      out.add_op(a.op);
      out.add_region_type(a.region_type);
      out.add_data_type(a.data_type);
      out.add_tensor_shape(a.tensor_shape);
    }
  }
  return part;
}

void MemoryProfileBuilder::add_part(size_t file_index, const podscope::v1::MemoryPart& part,
                                    std::optional<int64_t> host_clock_offset_ns) {
  const int64_t shift = part.has_clock_offset_ns() ? 0 : host_clock_offset_ns.value_or(0);
  std::vector<uint32_t> ids;
  ids.reserve(static_cast<size_t>(part.strings_size()));
  for (const std::string& text : part.strings()) ids.push_back(intern(text));
  const auto id_of = [&](uint32_t index) { return index < ids.size() ? ids[index] : 0; };
  if (part.has_host_name()) host_names_[file_index] = part.host_name();
  events_ += part.events();
  warnings_.events_missing_stats += part.events_missing_stats();
  for (const auto& in : part.allocators()) {
    Allocator& allocator = allocators_[{file_index, in.name()}];
    allocator.name = in.name();
    allocator.file_index = file_index;
    const int n = in.time_ns_size();
    // A part whose columns differ in length was not written by take_part: its allocator is left out.
    if (in.allocation_size() != n || in.bytes_reserved_size() != n || in.bytes_allocated_size() != n ||
        in.bytes_available_size() != n || in.fragmentation_size() != n || in.peak_bytes_in_use_size() != n ||
        in.requested_bytes_size() != n || in.allocation_bytes_size() != n || in.address_size() != n ||
        in.step_id_size() != n || in.op_size() != n || in.region_type_size() != n || in.data_type_size() != n ||
        in.tensor_shape_size() != n) {
      continue;
    }
    for (int i = 0; i < n; ++i) {
      allocator.activities.push_back({.time_ns = in.time_ns(i) - shift,
                                      .allocation = in.allocation(i),
                                      .bytes_reserved = in.bytes_reserved(i),
                                      .bytes_allocated = in.bytes_allocated(i),
                                      .bytes_available = in.bytes_available(i),
                                      .fragmentation = in.fragmentation(i),
                                      .peak_bytes_in_use = in.peak_bytes_in_use(i),
                                      .requested_bytes = in.requested_bytes(i),
                                      .allocation_bytes = in.allocation_bytes(i),
                                      .address = in.address(i),
                                      .step_id = in.step_id(i),
                                      .op = id_of(in.op(i)),
                                      .region_type = id_of(in.region_type(i)),
                                      .data_type = id_of(in.data_type(i)),
                                      .tensor_shape = id_of(in.tensor_shape(i))});
    }
  }
}

MemoryProfileResult MemoryProfileBuilder::finish(size_t max_timeline_points) && {
  MemoryProfileResult result;
  MemoryProfile& out = result.profile;
  out.set_version(1);
  result.events = events_;
  if (allocators_.empty()) {
    result.warnings = warnings_;
    return result;
  }
  std::set<size_t> files;
  int64_t origin_ns = std::numeric_limits<int64_t>::max();
  for (const auto& [source, allocator] : allocators_) {
    files.insert(source.file_index);
    for (const Activity& a : allocator.activities) origin_ns = std::min(origin_ns, a.time_ns);
  }
  out.set_num_hosts(static_cast<int32_t>(files.size()));
  for (auto& [source, allocator] : allocators_) {
    std::string id = allocator.name;
    if (files.size() > 1) {
      auto host = host_names_.find(source.file_index);
      id = (host != host_names_.end() ? host->second : "file" + std::to_string(source.file_index)) + "/" + id;
    }
    (*out.mutable_memory_profile_per_allocator())[id] = profile_of(allocator, origin_ns, max_timeline_points);
    out.add_memory_ids(id);
    allocator.activities = {};
  }
  std::sort(out.mutable_memory_ids()->begin(), out.mutable_memory_ids()->end());
  result.warnings = warnings_;
  result.freed_from_before = freed_from_before_;
  return result;
}

MemoryProfileResult xplane_to_memory_profile(const tensorflow::profiler::XPlane& host_plane) {
  MemoryProfileBuilder builder;
  builder.add_plane(0, host_plane);
  return std::move(builder).finish();
}

}  // namespace podscope::analysis
