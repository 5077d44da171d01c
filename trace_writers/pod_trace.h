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
#include "run_directory/run_file_reader.h"
#include "trace_writers/merged_trace.h"
#include "trace_writers/perfetto_trace.h"
#include "run_directory/streamed_file.h"

namespace podscope::trace_writers {

inline constexpr std::string_view kPodTraceStem = "pod";
// The most hosts `podscope analyze` traces in a whole run's pod trace by default: a trace viewer shows some tens of
// hosts' processes usefully, and past that the trace costs more than the analysis it sits beside (it reads every host
// file, which a merge of per-host databases does not).
inline constexpr int kDefaultTraceMaxHosts = 64;

struct PodTraceFiles {
  std::string json;  // where each file is (run_directory::RunDirectory::location_of)
  std::string perfetto;
  PerfettoTraceCounts counts;
  // Files that could not be read (whole planes before a break are in the traces), each with the reason.
  std::vector<std::string> skipped_files;
};

class PodTraceWriter {
 public:
  // Starts <run>/<stem>.trace.json.gz and <run>/<stem>.perfetto-trace. JSON times are relative to
  // `time_base_ns` (coordinator clock; without one, the first event's time).
  static absl::StatusOr<std::unique_ptr<PodTraceWriter>> open(const run_directory::RunDirectory& run,
                                                              std::string_view stem,
                                                              std::optional<int64_t> time_base_ns,
                                                              std::optional<TraceWindow> window = {});

  void add_plane(const PlaneOrigin& origin, const tensorflow::profiler::XPlane& plane);
  absl::StatusOr<PodTraceFiles> commit();

 private:
  PodTraceWriter(std::optional<int64_t> time_base_ns, std::optional<TraceWindow> window)
      : json_(json_file_, time_base_ns, window), perfetto_(perfetto_file_, window) {}

  run_directory::StreamedFile json_file_;
  run_directory::StreamedFile perfetto_file_;
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

// Reads every profile file of `run` plane by plane (a file's host name and clock offset from its planes' stats, names
// in proto/xspace/names.h; a file whose planes name no host is named by its stem) and writes the trace files of
// `selection` into it: pod.* for the whole run, pod.<A>-<B>ms.* or pod.step<N>.* for a window.
absl::StatusOr<PodTraceFiles> write_run_traces(const run_directory::RunDirectory& run, const TraceSelection& selection);
// The same, reading through `files`, shared with the caller's other passes over the run (the analysis'): each
// torch.profiler trace is converted once for all of them.
absl::StatusOr<PodTraceFiles> write_run_traces(const run_directory::RunDirectory& run, const TraceSelection& selection,
                                               run_directory::RunFileReader& files);
// The same over the files given (run_directory::check_run_files' list) instead of a run's, written into `output`.
absl::StatusOr<PodTraceFiles> write_traces(const std::vector<run_directory::RunFile>& files,
                                           const run_directory::RunDirectory& output, const TraceSelection& selection,
                                           run_directory::RunFileReader& reader);

}  // namespace podscope::trace_writers
