// The one answer to "what are the steps of a plane": the step database (step_database.h), which every tool that
// reads steps reads, and the trace writers' channel flows ask here. A step source is one entry of StepSource and
// one reader below:
//   1. the device plane's `Steps` line (podscope's `Step` annotation, XProf's converted planes);
//   2. the `group_id` stat of its ops (TensorFlow/JAX step grouping): one step per group, first op to last;
//   3. step markers on its file's `/host:CPU` plane, when no device plane of the file has steps of its own:
//      TensorFlow's TraceMe markers (`train`, `test`, `TraceContext`), else NVTX ranges (`train`, `step`)
//      that the CUPTI injection library records; each op belongs to the last marker started at or before it.
// Around the sources: normalization (by start, overlaps cut), trimming of steps cut by the capture window, and
// the host name a file's cores are named by.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/steps/plane_walk.h"

#include "analysis/steps/op_classifier.h"
#include "proto/xspace/xplane_reader.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

struct StepSpan {
  int64_t step_num = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// Where a core's steps came from.
enum class StepSource { kNone, kStepsLine, kGroupIds, kHostMarkers, kNvtxRanges };

// Why a run has no steps, naming the step sources looked for and how to add one.
std::string no_steps_explanation();

// The kind of a device plane by its name, or nullopt for planes that are not device planes.
std::optional<PlaneKind> device_plane_kind(std::string_view plane_name);

// Sorts steps by start and cuts overlapping ones at the start of the next (overlapping step events would
// count the same time twice); drops empty ones.
void normalize_steps(std::vector<StepSpan>& steps);

// The steps of a device plane's Steps line, numbered by `step_num`, `group_id`, or a name / `step_name` that
// is a number; normalized.
std::vector<StepSpan> read_steps_line(const xspace::XPlaneReader& plane);

// The step whose span holds `time_ns` (steps normalized), if any.
std::optional<int64_t> step_at(const std::vector<StepSpan>& steps, int64_t time_ns);

// The steps of one device plane from its own events (sources 1 and 2), while the caller walks its op events:
// the Steps line when it has one, else a step per `group_id` of its ops.
class DeviceStepSpans {
 public:
  explicit DeviceStepSpans(const xspace::XPlaneReader& plane);
  // The id of the `group_id` stat the caller reads on each op, or nullopt when the Steps line decides.
  std::optional<int64_t> group_id_stat() const { return group_id_stat_; }
  // An op of the plane and its `group_id` stat's value.
  void add_op(int64_t start_ns, int64_t end_ns, std::optional<int64_t> group);
  // The step of an op as far as it is known while the events stream: its group, else the Steps line's step.
  std::optional<int64_t> step_of(int64_t start_ns, std::optional<int64_t> group) const;
  // Once every op was added: the steps (normalized) and where they came from (kNone: none of its own).
  StepSource source() const;
  std::vector<StepSpan> take_steps() &&;

 private:
  struct GroupSpan {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
  };
  std::vector<StepSpan> steps_line_;
  std::optional<int64_t> group_id_stat_;
  std::map<int64_t, GroupSpan> groups_;
};

// The host step markers of a `/host:CPU` plane (source 3): TensorFlow's markers, events on any line whose name
// starts with `train`, `test` or `TraceContext`, numbered by their `step_num`, `iter_num` or `step_id` stat;
// without any, NVTX ranges (lines `NVTX thread <tid>`) whose name starts with `train` or `step`. A marker
// without a number is numbered one past the marker before it (the first: 0). Sorted by start; a marker nested
// inside another is dropped, overlapping ones are cut at the start of the next.
struct HostStepMarkers {
  StepSource source = StepSource::kNone;
  std::vector<StepSpan> markers;
};
HostStepMarkers read_host_step_markers(const tensorflow::profiler::XPlane& host_plane);
// The same in a walk of the host plane's lines (plane_walk.h).
class HostStepMarkerReader final : public PlaneEventReader {
 public:
  struct Marker {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    std::optional<int64_t> step_num;
  };
  bool reads_line(const tensorflow::profiler::XLine&) const override { return true; }
  void begin_line(const tensorflow::profiler::XLine& line) override;
  void add_event(const xspace::XEventView& e) override;
  HostStepMarkers finish() &&;

 private:
  std::vector<Marker> trace_me_;
  std::vector<Marker> nvtx_;
  bool nvtx_line_ = false;
};

// Steps of a device plane without steps of its own from its file's host markers: each op belongs to the last
// marker that started at or before it (the device runs behind the host that launched its work); a step spans
// from its first op to its last.
class MarkerStepSpans {
 public:
  explicit MarkerStepSpans(const std::vector<StepSpan>& markers) : markers_(markers) {}
  // Adds an op; returns the step it belongs to (none before the first marker).
  std::optional<int64_t> add_op(int64_t start_ns, int64_t end_ns);
  std::vector<StepSpan> take_steps() &&;

 private:
  const std::vector<StepSpan>& markers_;
  std::map<int64_t, StepSpan> steps_;
};

// Which steps of a file count: what its `/host:CPU` plane says of the capture window (host clock) and of its
// host, and its step markers with the rule deciding which device planes they number.
class FileSteps {
 public:
  // The stand-in host name of files whose planes name no host: "host<i>" for XSpaces held in memory; a run
  // directory's file is named by its stem instead (run_directory::file_stem).
  static std::string in_memory_stem(size_t file_index);

  // Host name and capture window of the file's `/host:CPU` plane (its stats: its lines are not read).
  void add_host_plane(const tensorflow::profiler::XPlane& host_plane);
  // The step markers of the file's `/host:CPU` plane (read_host_step_markers), by whichever reader read its lines.
  void set_host_markers(HostStepMarkers markers) { markers_ = std::move(markers); }
  // The XSpace's `hostnames`, and the file's stem: the host name when the host plane has none.
  void add_file_names(const std::vector<std::string>& hostnames, std::string_view file_stem);
  // A device plane of the file has steps of its own (a Steps line or group ids): TF grouped the file's events
  // from its markers, so a plane left without steps had no step work.
  void add_device_plane_source(StepSource source);
  bool device_steps_seen() const { return device_steps_seen_; }

  // A device plane's own host_name stat (a CPU-only PyTorch rank names only its core's plane).
  void add_device_plane_host(std::string_view host_name);
  // The host plane's host_name stat, else the XSpace's hostnames[0], else a device plane's own, else the file's stem.
  std::string host_name() const;
  // The markers that give steps to this file's device planes without steps of their own: none once a device
  // plane of the file has steps of its own.
  const HostStepMarkers& markers_for_unstepped_planes() const;
  const HostStepMarkers& host_markers() const { return markers_; }
  // A step that starts at or before the capture start or ends at or after its end is partial.
  bool cut_by_window(int64_t start_ns, int64_t end_ns) const;
  std::optional<int64_t> capture_start_ns() const { return capture_start_ns_; }
  std::optional<int64_t> capture_end_ns() const { return capture_end_ns_; }

 private:
  std::optional<std::string> host_plane_name_;
  std::optional<std::string> xspace_name_;
  std::optional<std::string> device_plane_name_;
  std::string file_stem_;
  std::optional<int64_t> capture_start_ns_;
  std::optional<int64_t> capture_end_ns_;
  HostStepMarkers markers_;
  bool device_steps_seen_ = false;
};

}  // namespace podscope::analysis
