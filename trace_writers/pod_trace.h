// The pod's trace files, written together in one pass over the planes: <stem>.trace.json.gz (Chrome JSON,
// merged_trace.h) and <stem>.perfetto-trace (Perfetto's protobuf, perfetto_trace.h), both on the
// coordinator clock, both streamed to disk as planes arrive and published atomically on commit. A capture
// feeds the planes it holds; `podscope analyze` reads a run directory's files plane by plane, so no trace
// size is too large and nothing is dropped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "absl/status/statusor.h"
#include "kineto/trace_file.h"
#include "trace_writers/merged_trace.h"
#include "trace_writers/perfetto_trace.h"
#include "trace_writers/streamed_file.h"

namespace podscope::pod_capture {

inline constexpr std::string_view kPodTraceStem = "pod";

struct PodTraceFiles {
  std::filesystem::path json;
  std::filesystem::path perfetto;
  PerfettoTraceCounts counts;
  // Files that could not be read (whole planes before a break are in the traces), each with the reason.
  std::vector<std::string> skipped_files;
};

class PodTraceWriter {
 public:
  // Starts <dir>/<stem>.trace.json.gz and <dir>/<stem>.perfetto-trace. JSON times are relative to
  // `time_base_ns` (coordinator clock; without one, the first event's time).
  static absl::StatusOr<std::unique_ptr<PodTraceWriter>> open(const std::filesystem::path& dir, std::string_view stem,
                                                              std::optional<int64_t> time_base_ns,
                                                              std::optional<TraceWindow> window = {});

  void add_plane(const PlaneOrigin& origin, const tensorflow::profiler::XPlane& plane);
  absl::StatusOr<PodTraceFiles> commit();

 private:
  PodTraceWriter(std::optional<int64_t> time_base_ns, std::optional<TraceWindow> window)
      : json_(json_file_, time_base_ns, window), perfetto_(perfetto_file_, window) {}

  StreamedFile json_file_;
  StreamedFile perfetto_file_;
  JsonTraceWriter json_;
  PerfettoTraceWriter perfetto_;
  PodTraceFiles files_;
};

// Which part of a run `podscope analyze --trace-window` writes: all of it, a span of milliseconds from the
// capture's start (else, in files that record none, from the run's first event), or one step (from the first
// core's start of it to the last core's end, merged clocks; the steps as the analysis finds them,
// analysis/steps/step_spans.h).
struct TraceSelection {
  enum class Kind { kWhole, kMilliseconds, kStep };
  Kind kind = Kind::kWhole;
  double from_ms = 0;
  double to_ms = 0;
  int64_t step_num = 0;
};

// "A:B" (ms from the capture's start, A < B) or "step:N".
absl::StatusOr<TraceSelection> parse_trace_selection(std::string_view text);

// Reads every *.xplane.pb of `run_dir` plane by plane (a file's host name and clock offset from its planes'
// stats, names in proto/xspace/names.h; a file whose planes name no host is named by its stem) and writes the trace
// files of `selection` into it: pod.* for the whole run, pod.<A>-<B>ms.* or pod.step<N>.* for a window.
absl::StatusOr<PodTraceFiles> write_run_traces(const std::filesystem::path& run_dir, const TraceSelection& selection);
// The same, reading through `files`, shared with the caller's other passes over the run (the analysis'): each
// torch.profiler trace is converted once for all of them.
absl::StatusOr<PodTraceFiles> write_run_traces(const std::filesystem::path& run_dir, const TraceSelection& selection,
                                               kineto::RunFileReader& files);
// The same over the files given (analysis::check_run_files' list) instead of a directory's, written into
// `output_dir`.
absl::StatusOr<PodTraceFiles> write_traces(const std::vector<std::filesystem::path>& paths,
                                           const std::filesystem::path& output_dir, const TraceSelection& selection,
                                           kineto::RunFileReader& files);

}  // namespace podscope::pod_capture
