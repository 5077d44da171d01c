// XPlaneReader: the one way podscope reads XPlanes (its own and TF/JAX ones). Hands out events with
// Unix-ns times and stat lookup by name; stats on an event take precedence over its metadata's stats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "proto/xspace/saturating.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::xspace {

class XPlaneReader;

class XEventView {
 public:
  XEventView(const XPlaneReader& plane, const tensorflow::profiler::XLine& line,
             const tensorflow::profiler::XEvent& event)
      : plane_(&plane), line_(&line), event_(&event) {}

  std::string_view name() const;
  // Absolute times are ns since the Unix epoch (or the file's own origin for old TF files); Unix time in
  // ps would overflow int64, so picoseconds stay relative to the line.
  int64_t offset_ps() const;
  // Saturating: a file's times may be anything.
  int64_t start_ns() const { return saturating_add(line_->timestamp_ns(), offset_ps() / 1000); }
  int64_t duration_ps() const { return event_->duration_ps(); }
  int64_t duration_ns() const { return event_->duration_ps() / 1000; }
  int64_t end_ns() const {
    return saturating_add(line_->timestamp_ns(), saturating_add(offset_ps(), event_->duration_ps()) / 1000);
  }

  // Integer stats (int64, uint64, or a double that holds an integer) by stat name.
  std::optional<int64_t> int_stat(std::string_view name) const;
  std::optional<double> double_stat(std::string_view name) const;
  // String stats, including ref_value stats (which point at a stat metadata's name) and compressed_str_value
  // stats (inflated once, kept by the plane's reader).
  std::optional<std::string_view> str_stat(std::string_view name) const;
  // The same by the stat's id in the plane (XPlaneReader::stat_id, looked up once per plane by a reader of many
  // events); nullopt reads as a stat the plane does not have.
  std::optional<int64_t> int_stat(std::optional<int64_t> stat_id) const;
  std::optional<double> double_stat(std::optional<int64_t> stat_id) const;
  std::optional<std::string_view> str_stat(std::optional<int64_t> stat_id) const;

  const tensorflow::profiler::XEvent& proto() const { return *event_; }
  const tensorflow::profiler::XLine& line() const { return *line_; }

 private:
  const tensorflow::profiler::XStat* find_stat(std::optional<int64_t> stat_id) const;

  const XPlaneReader* plane_;
  const tensorflow::profiler::XLine* line_;
  const tensorflow::profiler::XEvent* event_;
};

class XPlaneReader {
 public:
  explicit XPlaneReader(const tensorflow::profiler::XPlane& plane);

  const tensorflow::profiler::XPlane& proto() const { return *plane_; }
  std::string_view name() const { return plane_->name(); }
  std::string_view event_name(int64_t metadata_id) const;
  const tensorflow::profiler::XEventMetadata* event_metadata(int64_t metadata_id) const;
  std::optional<int64_t> stat_id(std::string_view name) const;
  std::string_view stat_name(int64_t stat_id) const;

  // Plane-level stats by name.
  std::optional<int64_t> int_stat(std::string_view name) const;
  std::optional<double> double_stat(std::string_view name) const;
  std::optional<std::string_view> str_stat(std::string_view name) const;

  const tensorflow::profiler::XLine* find_line(std::string_view name) const;

  // The text of a string stat of this plane: str_value, the name a ref_value points at, or compressed_str_value
  // inflated (kept until the reader goes; a reader is used by one thread).
  std::optional<std::string_view> str_of(const tensorflow::profiler::XStat* stat) const;

  template <typename F>  // F(const XEventView&)
  void for_each_event(const tensorflow::profiler::XLine& line, F&& f) const {
    for (const auto& e : line.events()) f(XEventView(*this, line, e));
  }

 private:
  const tensorflow::profiler::XPlane* plane_;
  // Event metadata by id, looked up for every event: a vector when the ids are dense (every writer we know numbers
  // them from 1), protobuf's map otherwise.
  std::vector<const tensorflow::profiler::XEventMetadata*> dense_event_metadata_;
  absl::flat_hash_map<std::string_view, int64_t> stat_ids_;
  // Inflated compressed_str_value stats; node-based so that the views handed out stay valid.
  mutable std::unordered_map<const tensorflow::profiler::XStat*, std::string> inflated_;
};

// Numeric value of a stat, whatever numeric type it was written with.
std::optional<int64_t> stat_as_int(const tensorflow::profiler::XStat& stat);
std::optional<double> stat_as_double(const tensorflow::profiler::XStat& stat);

// The text of a compressed_str_value stat (gzip or zlib stream), or nullopt when it is not one or does not
// inflate.
std::optional<std::string> inflated_str_value(const tensorflow::profiler::XStat& stat);

// True when any line of any plane holds an event: a capture without one is an empty trace, as TF's tools say.
bool has_events(const tensorflow::profiler::XSpace& space);

}  // namespace podscope::xspace
