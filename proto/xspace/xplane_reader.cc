#include "proto/xspace/xplane_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>

namespace podscope::xspace {

using tensorflow::profiler::XEventMetadata;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XStat;

std::optional<int64_t> stat_as_int(const XStat& stat) {
  switch (stat.value_case()) {
    case XStat::kInt64Value: return stat.int64_value();
    case XStat::kUint64Value: return static_cast<int64_t>(stat.uint64_value());
    case XStat::kDoubleValue:
      if (std::isfinite(stat.double_value()) && std::floor(stat.double_value()) == stat.double_value()) {
        return static_cast<int64_t>(stat.double_value());
      }
      return std::nullopt;
    default: return std::nullopt;
  }
}

std::optional<double> stat_as_double(const XStat& stat) {
  switch (stat.value_case()) {
    case XStat::kDoubleValue: return stat.double_value();
    case XStat::kInt64Value: return static_cast<double>(stat.int64_value());
    case XStat::kUint64Value: return static_cast<double>(stat.uint64_value());
    default: return std::nullopt;
  }
}

namespace {

const XStat* find_in(const google::protobuf::RepeatedPtrField<XStat>& stats, int64_t id) {
  for (const XStat& s : stats) {
    if (s.metadata_id() == id) return &s;
  }
  return nullptr;
}

}  // namespace

std::string_view XEventView::name() const { return plane_->event_name(event_->metadata_id()); }

int64_t XEventView::offset_ps() const {
  return event_->data_case() == tensorflow::profiler::XEvent::kOffsetPs ? event_->offset_ps() : 0;
}

const XStat* XEventView::find_stat(std::optional<int64_t> id) const {
  if (!id) return nullptr;
  if (const XStat* s = find_in(event_->stats(), *id)) return s;
  if (const XEventMetadata* md = plane_->event_metadata(event_->metadata_id())) return find_in(md->stats(), *id);
  return nullptr;
}

std::optional<int64_t> XEventView::int_stat(std::string_view name) const { return int_stat(plane_->stat_id(name)); }

std::optional<double> XEventView::double_stat(std::string_view name) const {
  return double_stat(plane_->stat_id(name));
}

std::optional<std::string_view> XEventView::str_stat(std::string_view name) const {
  return str_stat(plane_->stat_id(name));
}

std::optional<int64_t> XEventView::int_stat(std::optional<int64_t> stat_id) const {
  const XStat* s = find_stat(stat_id);
  return s ? stat_as_int(*s) : std::nullopt;
}

std::optional<double> XEventView::double_stat(std::optional<int64_t> stat_id) const {
  const XStat* s = find_stat(stat_id);
  return s ? stat_as_double(*s) : std::nullopt;
}

std::optional<std::string_view> XEventView::str_stat(std::optional<int64_t> stat_id) const {
  return plane_->str_of(find_stat(stat_id));
}

XPlaneReader::XPlaneReader(const XPlane& plane) : plane_(&plane) {
  for (const auto& [id, md] : plane.stat_metadata()) stat_ids_.try_emplace(md.name(), id);
  int64_t min_id = 0;
  int64_t max_id = -1;
  for (const auto& [id, md] : plane.event_metadata()) {
    min_id = std::min(min_id, id);
    max_id = std::max(max_id, id);
  }
  const auto count = static_cast<int64_t>(plane.event_metadata_size());
  if (min_id >= 0 && max_id >= 0 && max_id <= 4 * count + 1024) {
    dense_event_metadata_.resize(static_cast<size_t>(max_id) + 1);
    for (const auto& [id, md] : plane.event_metadata()) dense_event_metadata_[static_cast<size_t>(id)] = &md;
  }
}

std::string_view XPlaneReader::event_name(int64_t metadata_id) const {
  const XEventMetadata* md = event_metadata(metadata_id);
  return md ? std::string_view(md->name()) : std::string_view();
}

const XEventMetadata* XPlaneReader::event_metadata(int64_t metadata_id) const {
  if (!dense_event_metadata_.empty()) {
    return metadata_id >= 0 && static_cast<size_t>(metadata_id) < dense_event_metadata_.size()
               ? dense_event_metadata_[static_cast<size_t>(metadata_id)]
               : nullptr;
  }
  auto it = plane_->event_metadata().find(metadata_id);
  return it == plane_->event_metadata().end() ? nullptr : &it->second;
}

std::optional<int64_t> XPlaneReader::stat_id(std::string_view name) const {
  auto it = stat_ids_.find(name);
  if (it == stat_ids_.end()) return std::nullopt;
  return it->second;
}

std::string_view XPlaneReader::stat_name(int64_t stat_id) const {
  auto it = plane_->stat_metadata().find(stat_id);
  return it == plane_->stat_metadata().end() ? std::string_view() : std::string_view(it->second.name());
}

std::optional<int64_t> XPlaneReader::int_stat(std::string_view name) const {
  const std::optional<int64_t> id = stat_id(name);
  const XStat* s = id ? find_in(plane_->stats(), *id) : nullptr;
  return s ? stat_as_int(*s) : std::nullopt;
}

std::optional<double> XPlaneReader::double_stat(std::string_view name) const {
  const std::optional<int64_t> id = stat_id(name);
  const XStat* s = id ? find_in(plane_->stats(), *id) : nullptr;
  return s ? stat_as_double(*s) : std::nullopt;
}

std::optional<std::string_view> XPlaneReader::str_stat(std::string_view name) const {
  const std::optional<int64_t> id = stat_id(name);
  return str_of(id ? find_in(plane_->stats(), *id) : nullptr);
}

std::optional<std::string_view> XPlaneReader::str_of(const XStat* stat) const {
  if (stat == nullptr) return std::nullopt;
  switch (stat->value_case()) {
    case XStat::kStrValue: return std::string_view(stat->str_value());
    case XStat::kRefValue: return stat_name(static_cast<int64_t>(stat->ref_value()));
    case XStat::kCompressedStrValue: {
      if (auto it = inflated_.find(stat); it != inflated_.end()) return std::string_view(it->second);
      std::optional<std::string> text = inflated_str_value(*stat);
      if (!text) return std::nullopt;
      return std::string_view(inflated_.emplace(stat, std::move(*text)).first->second);
    }
    default: return std::nullopt;
  }
}

const XLine* XPlaneReader::find_line(std::string_view name) const {
  for (const XLine& l : plane_->lines()) {
    if (l.name() == name) return &l;
  }
  return nullptr;
}

std::optional<std::string> inflated_str_value(const XStat& stat) {
  if (stat.value_case() != XStat::kCompressedStrValue) return std::nullopt;
  const std::string& compressed = stat.compressed_str_value();
  z_stream stream{};
  // 15 + 32: the largest window, with the gzip or zlib header detected from the stream.
  if (inflateInit2(&stream, 15 + 32) != Z_OK) return std::nullopt;
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  std::string text;
  char chunk[16384];
  int result = Z_OK;
  while (result == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(chunk);
    stream.avail_out = sizeof chunk;
    result = inflate(&stream, Z_NO_FLUSH);
    text.append(chunk, sizeof chunk - stream.avail_out);
  }
  inflateEnd(&stream);
  if (result != Z_STREAM_END) return std::nullopt;
  return text;
}

bool has_events(const tensorflow::profiler::XSpace& space) {
  for (const XPlane& plane : space.planes()) {
    for (const XLine& line : plane.lines()) {
      if (line.events_size() > 0) return true;
    }
  }
  return false;
}

}  // namespace podscope::xspace
