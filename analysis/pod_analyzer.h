// PodAnalyzer: XPlanes of one capture (from every host) in, PodAnalysis out. Planes are fed one at a
// time and dropped by the caller, in any order; each file's host plane (/host:CPU) supplies its host
// name, clock offset (host clock − coordinator clock, stat kClockOffsetStat) and capture window, and,
// for files whose device planes have no steps of their own, its step markers (add_host_markers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/core_trace.h"
#include "analysis/plane_walk.h"
#include "analysis/step_spans.h"
#include "analysis/straggler_analysis.h"
#include "podscope/v1/pod_analysis.pb.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

struct PodAnalyzerOptions {
  // Channel utilization is measured against this (default: a 100 Gb/s link).
  double peak_link_bandwidth_bytes_per_s = 12.5e9;
  StragglerOptions stragglers;
  size_t top_op_count = 20;
};

// What one host file says about itself (all from plane stats; see proto/xspace/names.h).
struct HostFileContext {
  FileSteps steps;  // its host name, capture window and which of its steps count
  // From /host:CPU; else from any device plane that carries it (the coordinator stamps every plane).
  std::optional<int64_t> clock_offset_ns;
};

// A device plane's trace and the file it came from.
struct TracedCore {
  size_t file_index = 0;
  CoreTrace trace;
};

class PodAnalyzer final : public PlaneConsumer {
 public:
  explicit PodAnalyzer(PodAnalyzerOptions options = {}) : options_(std::move(options)) {}

  // Whether the analysis reads this line's events (Steps and op lines of device planes): a reader can
  // leave the other lines out of the planes it hands to add_plane. The host plane's lines are left out
  // too (they can outweigh the device planes); see awaits_host_markers.
  static bool wants_line(std::string_view plane_name, std::string_view line_name);

  // Adds a plane of file `file_index` (the planes of one file share a host and a clock): in a walk shared with
  // other tools (plane_walk.h), or alone.
  void begin_plane(size_t file_index, const xspace::XPlaneReader& plane,
                   std::vector<PlaneEventReader*>& readers) override;
  void end_plane(size_t file_index) override;
  void add_plane(size_t file_index, const tensorflow::profiler::XPlane& plane) {
    read_plane_alone(*this, file_index, plane);
  }
  // Whether, after all planes of file `file_index`, device planes with ops but no steps await the
  // file's host step markers (no device plane of the file had steps of its own). The caller then hands
  // the markers of the file's host plane (read_host_step_markers) to add_host_markers.
  bool awaits_host_markers(size_t file_index) const;
  // Steps from the host plane's step markers for the planes awaiting them (see trace_core); without
  // markers they stay without steps.
  void add_host_markers(size_t file_index, const HostStepMarkers& markers);
  // After the file's markers: its host work (the step model's host segments of the file, step_model.h) fills its
  // cores' idle time (kernel launch, host compute, compilation).
  void add_host_work(size_t file_index, const std::vector<TypedInterval>& host_segments);
  // The XSpace's own `hostnames` and the file's stem, which name the host when its host plane does not.
  void add_file_names(size_t file_index, const std::vector<std::string>& hostnames, std::string_view file_stem);

  podscope::v1::PodAnalysis finish() &&;

 private:
  // A device plane that had ops but no steps: it is traced again with its file's host step markers,
  // unless another device plane of the file turns out to have steps.
  struct AwaitingHostMarkers {
    size_t core_index = 0;  // into cores_
    PlaneKind kind = PlaneKind::kCustom;
    tensorflow::profiler::XPlane plane;
  };

  HostFileContext& file(size_t file_index);

  // The device plane being walked.
  struct Tracing {
    const tensorflow::profiler::XPlane* plane = nullptr;
    PlaneKind kind = PlaneKind::kCustom;
    std::unique_ptr<CoreTraceReader> reader;
  };

  PodAnalyzerOptions options_;
  std::vector<HostFileContext> files_;
  std::vector<TracedCore> cores_;
  std::vector<AwaitingHostMarkers> awaiting_host_markers_;
  Tracing tracing_;
};

// Convenience for callers that hold whole XSpaces (one per host file, in file order).
podscope::v1::PodAnalysis analyze_pod(const std::vector<const tensorflow::profiler::XSpace*>& spaces,
                                      const PodAnalyzerOptions& options = {});

}  // namespace podscope::analysis
