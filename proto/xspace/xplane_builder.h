// XPlaneBuilder: the one way podscope writes XPlanes. Callers speak int64 ns since the Unix epoch;
// picoseconds and line-relative offsets stay inside this file and xplane_reader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::xspace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

// Adds typed stats to any message with `repeated XStat stats` (events, planes, event metadata).
class XStatsBuilder {
 public:
  XStatsBuilder(google::protobuf::RepeatedPtrField<XStat>* stats, class XPlaneBuilder* plane)
      : stats_(stats), plane_(plane) {}
  XStatsBuilder& add(std::string_view name, int64_t value);
  XStatsBuilder& add_uint(std::string_view name, uint64_t value);
  XStatsBuilder& add(std::string_view name, double value);
  XStatsBuilder& add(std::string_view name, std::string_view value);
  XStatsBuilder& add(int64_t stat_metadata_id, int64_t value);
  XStatsBuilder& add_uint(int64_t stat_metadata_id, uint64_t value);
  XStatsBuilder& add(int64_t stat_metadata_id, double value);

 private:
  google::protobuf::RepeatedPtrField<XStat>* stats_;
  XPlaneBuilder* plane_;
};

class XLineBuilder {
 public:
  XLineBuilder(XLine* line, XPlaneBuilder* plane) : line_(line), plane_(plane) {}

  // Adds an event that starts at `start_ns` (Unix ns) and lasts `duration_ns`. The line's timestamp is
  // its earliest event; adding an earlier one rebases the offsets of those already there.
  XStatsBuilder add_event(int64_t metadata_id, int64_t start_ns, int64_t duration_ns);
  XStatsBuilder add_event(std::string_view name, int64_t start_ns, int64_t duration_ns);
  // One point of a counter series on a `_counters_` line: a zero-length event named after the series.
  void add_counter(std::string_view series_name, int64_t time_ns, double value);

  XLine* proto() { return line_; }

 private:
  XLine* line_;
  XPlaneBuilder* plane_;
};

class XPlaneBuilder {
 public:
  // Takes an existing plane (possibly with content, e.g. one merged from elsewhere) and indexes its metadata.
  explicit XPlaneBuilder(XPlane* plane);

  int64_t event_metadata_id(std::string_view name);  // get or create
  int64_t stat_metadata_id(std::string_view name);   // get or create
  // Get or create the line with this id; a new line is named `name`.
  XLineBuilder line(int64_t id, std::string_view name);
  // Get or create a line by name; a new one takes an id no line has (the one after the highest).
  XLineBuilder line_named(std::string_view name);
  XStatsBuilder stats() { return XStatsBuilder(plane_->mutable_stats(), this); }

  XPlane* proto() { return plane_; }

 private:
  XPlane* plane_;
  // Keys are looked up through absl::string_view: Debian's abseil does not alias it to std::string_view.
  absl::flat_hash_map<std::string, int64_t> event_ids_;
  absl::flat_hash_map<std::string, int64_t> stat_ids_;
  absl::flat_hash_map<int64_t, int> line_index_by_id_;
  int64_t next_event_id_ = 1;
  int64_t next_stat_id_ = 1;
};

// Serializes a plane while it is built, so that its events need not all be held as objects at once: events added
// through the plane's XPlaneBuilder go to the wire a batch at a time (flush_events), and finish() appends the plane
// to serialized XSpace bytes as one `planes` entry. The bytes are those protobuf writes for the whole plane: each
// line's id, name and timestamp before its events, its duration and display fields after them, the plane's
// metadata and stats after its lines. Each line's events must be added in order of start (its timestamp is its
// first event's): a line whose events were flushed is never rebased.
class XPlaneStreamWriter {
 public:
  explicit XPlaneStreamWriter(XPlane& plane) : plane_(plane) {}

  // Moves the events held in the plane's lines to the wire.
  void flush_events();
  // Appends the plane (XSpace field 1) to `space_bytes` and leaves it empty.
  void finish(std::string& space_bytes);

 private:
  XPlane& plane_;
  // By line index, what was flushed, header first, one piece per flush: a growing string would leave each of its
  // smaller copies behind in the heap.
  std::vector<std::vector<std::string>> line_pieces_;
};

// Finds the plane with this name or appends a new one with the given id.
XPlane* find_or_add_plane(XSpace& space, std::string_view name, int64_t id = 0);
const XPlane* find_plane(const XSpace& space, std::string_view name);

// Shifts every timestamp in the space by `delta_ns` (lines only; events are relative to their line).
void shift_timestamps(XSpace& space, int64_t delta_ns);

// Appends `from`'s planes into `into`: a plane whose name already exists in `into` gets `from`'s lines
// appended with event/stat metadata ids remapped so they cannot collide; other planes are moved over.
void merge_space(XSpace&& from, XSpace& into);

// A device plane of `from` (`/device:<KIND>:<N>`) whose name `into` already holds is renamed, and its id set, to
// the lowest ordinal of its kind that neither space uses: processes that number their devices alike (each sees its
// GPUs from 0 under CUDA_VISIBLE_DEVICES, or several share one GPU) stay apart when merged. Returns each renamed
// plane's old and new name.
std::vector<std::pair<std::string, std::string>> renumber_taken_device_planes(XSpace& from, const XSpace& into);

}  // namespace podscope::xspace
