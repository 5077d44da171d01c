#include "proto/xspace/xplane_builder.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "proto/xspace/names.h"
#include "proto/xspace/utf8.h"

namespace podscope::xspace {
namespace {

constexpr int64_t kPsPerNs = 1000;

// Nanoseconds to picoseconds, saturating: times and durations come from client processes, and a hostile or broken
// value must give a clamped event, not signed overflow.
int64_t ns_to_ps(int64_t ns) {
  int64_t ps = 0;
  if (__builtin_mul_overflow(ns, kPsPerNs, &ps)) return ns < 0 ? INT64_MIN : INT64_MAX;
  return ps;
}

int64_t saturating_sub(int64_t a, int64_t b) {
  int64_t d = 0;
  if (__builtin_sub_overflow(a, b, &d)) return b < 0 ? INT64_MAX : INT64_MIN;
  return d;
}

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return b < 0 ? INT64_MIN : INT64_MAX;
  return sum;
}

// The id `ids` holds for `name`, else the next free one, given to a new entry of `metadata` (the plane's event or
// stat metadata) that names it.
template <typename MetadataMap>
int64_t get_or_add_metadata(std::string_view name, absl::flat_hash_map<std::string, int64_t>& ids, int64_t& next_id,
                            MetadataMap& metadata) {
  auto [it, inserted] = ids.try_emplace(absl::string_view(name.data(), name.size()), next_id);
  if (inserted) {
    auto& md = metadata[next_id];
    md.set_id(next_id);
    md.set_name(valid_utf8(name));
    ++next_id;
  }
  return it->second;
}

}  // namespace

XStatsBuilder& XStatsBuilder::add(int64_t id, int64_t value) {
  XStat* s = stats_->Add();
  s->set_metadata_id(id);
  s->set_int64_value(value);
  return *this;
}
XStatsBuilder& XStatsBuilder::add_uint(int64_t id, uint64_t value) {
  XStat* s = stats_->Add();
  s->set_metadata_id(id);
  s->set_uint64_value(value);
  return *this;
}
XStatsBuilder& XStatsBuilder::add(int64_t id, double value) {
  XStat* s = stats_->Add();
  s->set_metadata_id(id);
  s->set_double_value(value);
  return *this;
}
XStatsBuilder& XStatsBuilder::add(std::string_view name, int64_t value) {
  return add(plane_->stat_metadata_id(name), value);
}
XStatsBuilder& XStatsBuilder::add_uint(std::string_view name, uint64_t value) {
  return add_uint(plane_->stat_metadata_id(name), value);
}
XStatsBuilder& XStatsBuilder::add(std::string_view name, double value) {
  return add(plane_->stat_metadata_id(name), value);
}
XStatsBuilder& XStatsBuilder::add(std::string_view name, std::string_view value) {
  XStat* s = stats_->Add();
  s->set_metadata_id(plane_->stat_metadata_id(name));
  s->set_str_value(valid_utf8(value));
  return *this;
}

XStatsBuilder XLineBuilder::add_event(int64_t metadata_id, int64_t start_ns, int64_t duration_ns) {
  if (line_->events_size() == 0 && line_->timestamp_ns() == 0) {
    line_->set_timestamp_ns(start_ns);
  } else if (start_ns < line_->timestamp_ns()) {
    const int64_t shift_ps = ns_to_ps(saturating_sub(line_->timestamp_ns(), start_ns));
    for (XEvent& e : *line_->mutable_events()) {
      if (e.data_case() == XEvent::kOffsetPs) e.set_offset_ps(saturating_add(e.offset_ps(), shift_ps));
    }
    line_->set_timestamp_ns(start_ns);
  }
  XEvent* event = line_->add_events();
  event->set_metadata_id(metadata_id);
  event->set_offset_ps(ns_to_ps(saturating_sub(start_ns, line_->timestamp_ns())));
  event->set_duration_ps(ns_to_ps(duration_ns));
  const int64_t end_ps = saturating_add(event->offset_ps(), event->duration_ps());
  if (end_ps > line_->duration_ps()) line_->set_duration_ps(end_ps);
  return XStatsBuilder(event->mutable_stats(), plane_);
}

XStatsBuilder XLineBuilder::add_event(std::string_view name, int64_t start_ns, int64_t duration_ns) {
  return add_event(plane_->event_metadata_id(name), start_ns, duration_ns);
}

void XLineBuilder::add_counter(std::string_view series_name, int64_t time_ns, double value) {
  add_event(series_name, time_ns, 0).add(kCounterValueStat, value);
}

XPlaneBuilder::XPlaneBuilder(XPlane* plane) : plane_(plane) {
  for (const auto& [id, md] : plane_->event_metadata()) {
    event_ids_.try_emplace(md.name(), id);
    next_event_id_ = std::max(next_event_id_, id + 1);
  }
  for (const auto& [id, md] : plane_->stat_metadata()) {
    stat_ids_.try_emplace(md.name(), id);
    next_stat_id_ = std::max(next_stat_id_, id + 1);
  }
  for (int i = 0; i < plane_->lines_size(); ++i) line_index_by_id_[plane_->lines(i).id()] = i;
}

int64_t XPlaneBuilder::event_metadata_id(std::string_view name) {
  return get_or_add_metadata(name, event_ids_, next_event_id_, *plane_->mutable_event_metadata());
}

int64_t XPlaneBuilder::stat_metadata_id(std::string_view name) {
  return get_or_add_metadata(name, stat_ids_, next_stat_id_, *plane_->mutable_stat_metadata());
}

XLineBuilder XPlaneBuilder::line(int64_t id, std::string_view name) {
  auto [it, inserted] = line_index_by_id_.try_emplace(id, plane_->lines_size());
  if (inserted) {
    XLine* l = plane_->add_lines();
    l->set_id(id);
    l->set_display_id(id);
    l->set_name(valid_utf8(name));
  }
  return XLineBuilder(plane_->mutable_lines(it->second), this);
}

XLineBuilder XPlaneBuilder::line_named(std::string_view name) {
  for (XLine& l : *plane_->mutable_lines()) {
    if (l.name() == name) return XLineBuilder(&l, this);
  }
  // The id after the highest; past int64's range (a hostile thread id), the lowest id not taken.
  int64_t id = 0;
  bool past_range = false;
  for (const XLine& l : plane_->lines()) {
    if (l.id() == std::numeric_limits<int64_t>::max()) past_range = true;
    else id = std::max(id, l.id() + 1);
  }
  if (past_range) {
    id = 0;
    while (line_index_by_id_.contains(id)) ++id;
  }
  return line(id, name);
}

void XPlaneStreamWriter::flush_events() {
  line_pieces_.resize(static_cast<size_t>(plane_.lines_size()));
  for (int i = 0; i < plane_.lines_size(); ++i) {
    XLine& line = *plane_.mutable_lines(i);
    // A line stamped 0 would take its next event's start as its timestamp: its events stay until finish().
    if (line.events_size() == 0 || line.timestamp_ns() == 0) continue;
    std::vector<std::string>& pieces = line_pieces_[static_cast<size_t>(i)];
    std::string piece;
    if (pieces.empty()) {
      XLine header;
      header.set_id(line.id());
      header.set_name(line.name());
      header.set_timestamp_ns(line.timestamp_ns());
      header.AppendToString(&piece);
    }
    XLine events;
    events.mutable_events()->Swap(line.mutable_events());
    events.AppendToString(&piece);
    pieces.push_back(std::move(piece));
    // The batch's objects go back to the line cleared, not freed: the next batch's events reuse them, so that a plane
    // of a million events costs one batch of allocations rather than a million (they were half of a build's time).
    events.mutable_events()->Clear();
    line.mutable_events()->Swap(events.mutable_events());
  }
}

void XPlaneStreamWriter::finish(std::string& space_bytes) {
  using google::protobuf::internal::WireFormatLite;
  using google::protobuf::io::CodedOutputStream;
  line_pieces_.resize(static_cast<size_t>(plane_.lines_size()));
  // Each line's rest: everything when nothing was flushed, else what follows its events.
  std::vector<size_t> line_sizes;
  for (int i = 0; i < plane_.lines_size(); ++i) {
    XLine& line = *plane_.mutable_lines(i);
    std::vector<std::string>& pieces = line_pieces_[static_cast<size_t>(i)];
    if (!pieces.empty()) {
      line.clear_id();
      line.clear_name();
      line.clear_timestamp_ns();
    }
    pieces.push_back(line.SerializeAsString());
    size_t size = 0;
    for (const std::string& piece : pieces) size += piece.size();
    line_sizes.push_back(size);
  }
  plane_.clear_lines();
  XPlane head;
  head.set_id(plane_.id());
  head.set_name(plane_.name());
  plane_.clear_id();
  plane_.clear_name();
  size_t size = head.ByteSizeLong() + plane_.ByteSizeLong();
  for (size_t line_size : line_sizes) size += 1 + CodedOutputStream::VarintSize64(line_size) + line_size;
  auto append_tag_and_size = [&space_bytes](int field, size_t bytes) {
    char prefix[16];
    uint8_t* end = CodedOutputStream::WriteTagToArray(
        WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), reinterpret_cast<uint8_t*>(prefix));
    end = CodedOutputStream::WriteVarint64ToArray(bytes, end);
    space_bytes.append(prefix, static_cast<size_t>(reinterpret_cast<char*>(end) - prefix));
  };
  append_tag_and_size(XSpace::kPlanesFieldNumber, size);
  head.AppendToString(&space_bytes);
  for (size_t i = 0; i < line_pieces_.size(); ++i) {
    append_tag_and_size(XPlane::kLinesFieldNumber, line_sizes[i]);
    for (std::string& piece : line_pieces_[i]) {
      space_bytes += piece;
      std::string().swap(piece);
    }
  }
  plane_.AppendToString(&space_bytes);
  plane_.Clear();
  line_pieces_.clear();
}

XPlane* find_or_add_plane(XSpace& space, std::string_view name, int64_t id) {
  for (XPlane& p : *space.mutable_planes()) {
    if (p.name() == name) return &p;
  }
  XPlane* p = space.add_planes();
  p->set_name(valid_utf8(name));
  p->set_id(id);
  return p;
}

const XPlane* find_plane(const XSpace& space, std::string_view name) {
  for (const XPlane& p : space.planes()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

void shift_timestamps(XSpace& space, int64_t delta_ns) {
  for (XPlane& p : *space.mutable_planes()) {
    for (XLine& l : *p.mutable_lines()) l.set_timestamp_ns(l.timestamp_ns() + delta_ns);
  }
}

namespace {

void remap_stats(google::protobuf::RepeatedPtrField<XStat>* stats,
                 const absl::flat_hash_map<int64_t, int64_t>& stat_map) {
  for (XStat& s : *stats) {
    if (auto it = stat_map.find(s.metadata_id()); it != stat_map.end()) s.set_metadata_id(it->second);
    if (s.value_case() == XStat::kRefValue) {
      if (auto it = stat_map.find(static_cast<int64_t>(s.ref_value())); it != stat_map.end()) {
        s.set_ref_value(static_cast<uint64_t>(it->second));
      }
    }
  }
}

// Moves `from`'s lines and stats into `into`, translating metadata ids through names.
void merge_plane(XPlane&& from, XPlane& into) {
  XPlaneBuilder target(&into);
  absl::flat_hash_map<int64_t, int64_t> stat_map;
  for (const auto& [id, md] : from.stat_metadata()) stat_map[id] = target.stat_metadata_id(md.name());
  absl::flat_hash_map<int64_t, int64_t> event_map;
  for (auto& [id, md] : *from.mutable_event_metadata()) {
    const int64_t new_id = target.event_metadata_id(md.name());
    event_map[id] = new_id;
    auto& dst = (*into.mutable_event_metadata())[new_id];
    if (dst.display_name().empty()) dst.set_display_name(md.display_name());
    if (dst.stats_size() == 0) {
      remap_stats(md.mutable_stats(), stat_map);
      *dst.mutable_stats() = std::move(*md.mutable_stats());
    }
  }
  int64_t next_line_id = 0;
  absl::flat_hash_map<int64_t, bool> used_line_ids;
  for (const XLine& l : into.lines()) {
    used_line_ids[l.id()] = true;
    next_line_id = std::max(next_line_id, l.id() + 1);
  }
  for (XLine& l : *from.mutable_lines()) {
    for (XEvent& e : *l.mutable_events()) {
      if (auto it = event_map.find(e.metadata_id()); it != event_map.end()) e.set_metadata_id(it->second);
      remap_stats(e.mutable_stats(), stat_map);
    }
    if (used_line_ids.contains(l.id())) {
      l.set_id(next_line_id);
      l.set_display_id(next_line_id);
    }
    used_line_ids[l.id()] = true;
    next_line_id = std::max(next_line_id, l.id() + 1);
    *into.add_lines() = std::move(l);
  }
  remap_stats(from.mutable_stats(), stat_map);
  for (XStat& s : *from.mutable_stats()) *into.add_stats() = std::move(s);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> renumber_taken_device_planes(XSpace& from, const XSpace& into) {
  constexpr std::string_view kDevicePrefix = "/device:";
  // "/device:GPU:3" → "/device:GPU:"; nullopt for a name that is no device plane's.
  const auto kind_prefix = [&](std::string_view name) -> std::optional<std::string_view> {
    const size_t colon = name.rfind(':');
    if (!name.starts_with(kDevicePrefix) || colon < kDevicePrefix.size() || colon + 1 == name.size())
      return std::nullopt;
    const std::string_view digits = name.substr(colon + 1);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
    return name.substr(0, colon + 1);
  };
  std::set<std::string, std::less<>> taken;
  for (const XPlane& p : into.planes()) taken.insert(p.name());
  for (const XPlane& p : from.planes()) taken.insert(p.name());
  std::vector<std::pair<std::string, std::string>> renamed;
  for (XPlane& plane : *from.mutable_planes()) {
    const auto prefix = kind_prefix(plane.name());
    if (!prefix || !find_plane(into, plane.name())) continue;
    int64_t ordinal = 0;
    std::string name;
    do {
      name = std::string(*prefix) + std::to_string(ordinal++);
    } while (taken.contains(name));
    taken.insert(name);
    renamed.emplace_back(plane.name(), name);
    plane.set_name(std::move(name));
    plane.set_id(ordinal - 1);
  }
  return renamed;
}

void merge_space(XSpace&& from, XSpace& into) {
  for (XPlane& plane : *from.mutable_planes()) {
    XPlane* existing = nullptr;
    for (XPlane& p : *into.mutable_planes()) {
      if (p.name() == plane.name()) existing = &p;
    }
    if (existing) {
      merge_plane(std::move(plane), *existing);
    } else {
      *into.add_planes() = std::move(plane);
    }
  }
  for (auto& w : *from.mutable_warnings()) into.add_warnings(std::move(w));
  for (auto& e : *from.mutable_errors()) into.add_errors(std::move(e));
  for (auto& h : *from.mutable_hostnames()) {
    if (std::find(into.hostnames().begin(), into.hostnames().end(), h) == into.hostnames().end()) {
      into.add_hostnames(std::move(h));
    }
  }
}

}  // namespace podscope::xspace
