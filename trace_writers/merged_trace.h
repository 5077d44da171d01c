// The pod's merged trace in Chrome's JSON trace format (pod.trace.json.gz): every host's events moved onto
// the coordinator's clock (agent time − measured offset), a process per host and plane, a thread per line,
// each event's stats as its args; `_counters_` lines become counter tracks. Times are µs with three
// decimals relative to a base recorded in the trace's `otherData` (`time_base_ns`, coordinator-clock ns):
// absolute Unix µs do not fit a double at ns precision, and readers parse `ts` as a double, so slices
// that nest by a few ns would stop nesting. Written plane by plane into a StreamedFile.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "run_directory/streamed_file.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::pod_capture {

// Where a plane's events sit on the pod's timeline.
struct PlaneOrigin {
  std::string_view host_name;
  int64_t clock_offset_ns = 0;  // host clock − coordinator clock
};

// A span of coordinator-clock time; a trace limited to it keeps the events that overlap it (whole) and the
// counter values inside it.
struct TraceWindow {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool overlaps(int64_t start, int64_t end) const { return start <= end_ns && end >= start_ns; }
};

class JsonTraceWriter {
 public:
  // `time_base_ns`: what `ts` is relative to; without one, the first event's time is the base.
  JsonTraceWriter(run_directory::StreamedFile& out, std::optional<int64_t> time_base_ns,
                  std::optional<TraceWindow> window = {});

  void add_plane(const PlaneOrigin& origin, const tensorflow::profiler::XPlane& plane);
  // Closes the JSON document (the StreamedFile is the caller's to commit).
  void finish();

 private:
  void append_event_separator();
  void flush_if_large();

  run_directory::StreamedFile& out_;
  std::optional<int64_t> time_base_ns_;
  std::optional<TraceWindow> window_;
  std::string buffer_;
  bool first_event_ = true;
  int pid_ = 0;
};

}  // namespace podscope::pod_capture
