#include "trace_writers/pod_trace.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <vector>

#include "analysis/steps/step_database.h"
#include "run_directory/run_directory.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace podscope::pod_capture {
namespace {

using tensorflow::profiler::XPlane;

// What a host file says about itself, read before its events.
struct HostFile {
  explicit HostFile(run_directory::RunFile run_file) : file(std::move(run_file)) {}
  run_directory::RunFile file;
  std::string host_name;
  int64_t clock_offset_ns = 0;
  std::optional<int64_t> capture_start_ns;  // coordinator clock
  std::optional<int64_t> first_event_ns;    // coordinator clock; read only for a window in ms
};

// The first and last instant of one step over every core, coordinator clock.
struct StepExtent {
  int64_t start_ns = std::numeric_limits<int64_t>::max();
  int64_t end_ns = std::numeric_limits<int64_t>::min();
  bool found() const { return start_ns <= end_ns; }
};

// The earliest event start of the planes read, per plane with its own clock offset when it has one.
class FirstEvent {
 public:
  void add_plane(const xspace::XPlaneReader& plane) {
    std::optional<int64_t> first;
    for (const auto& line : plane.proto().lines()) {
      plane.for_each_event(
          line, [&](const xspace::XEventView& e) { first = std::min(first.value_or(e.start_ns()), e.start_ns()); });
    }
    if (first) firsts_.push_back({*first, plane.int_stat(xspace::kClockOffsetStat)});
  }
  std::optional<int64_t> coordinator_time(int64_t file_offset_ns) const {
    std::optional<int64_t> earliest;
    for (const auto& [time, offset] : firsts_) {
      const int64_t t = time - offset.value_or(file_offset_ns);
      earliest = std::min(earliest.value_or(t), t);
    }
    return earliest;
  }

 private:
  std::vector<std::pair<int64_t, std::optional<int64_t>>> firsts_;
};

// Reads what `selection` needs of `run_file`: its host name and clock offset (plane stats); for a step, the step
// spans of its device planes (analysis/steps/step_spans.h, as the analysis finds them), extending `extent`; for a
// window in ms, its first event.
absl::StatusOr<HostFile> read_host_file(run_directory::RunFileReader& files, const run_directory::RunFile& run_file,
                                        const TraceSelection& selection, StepExtent& extent) {
  HostFile file(run_file);
  analysis::FileStepSpans steps;
  FirstEvent first_event;
  std::optional<int64_t> device_offset;
  xspace::XSpaceHeader header;
  const auto keep_line = [&](std::string_view plane_name, std::string_view line_name) {
    return selection.kind != TraceSelection::Kind::kWhole && analysis::FileStepSpans::wants_line(plane_name, line_name);
  };
  absl::Status status = files.read_planes(
      run_file,
      [&](const XPlane& plane) {
        const xspace::XPlaneReader reader(plane);
        if (plane.name() != xspace::kHostPlaneName && !device_offset) {
          device_offset = reader.int_stat(xspace::kClockOffsetStat);
        }
        steps.add_plane(plane);
        if (selection.kind == TraceSelection::Kind::kMilliseconds) first_event.add_plane(reader);
        return absl::OkStatus();
      },
      &header, keep_line);
  if (!status.ok()) return status;
  steps.add_file_names(header.hostnames, run_directory::file_stem(run_file.name));
  const analysis::FileStepSpans::Result found = std::move(steps).finish();
  file.host_name = found.host_name;
  file.clock_offset_ns = found.clock_offset_ns.value_or(device_offset.value_or(0));
  if (found.capture_start_ns) file.capture_start_ns = *found.capture_start_ns - file.clock_offset_ns;
  file.first_event_ns = first_event.coordinator_time(file.clock_offset_ns);
  for (const auto& plane : found.planes) {
    const int64_t plane_offset = plane.clock_offset_ns.value_or(file.clock_offset_ns);
    for (const analysis::StepSpan& s : plane.steps) {
      if (selection.kind != TraceSelection::Kind::kStep || s.step_num != selection.step_num) continue;
      extent.start_ns = std::min(extent.start_ns, s.start_ns - plane_offset);
      extent.end_ns = std::max(extent.end_ns, s.end_ns - plane_offset);
    }
  }
  return file;
}

std::optional<double> parse_double(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A window bound in ms as the trace file's stem names it: as short as it reads ("0.5", "12").
std::string window_bound_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", ms);
  return buf;
}

// The window, JSON time base and file stem of `selection`.
struct Plan {
  std::optional<TraceWindow> window;
  std::optional<int64_t> time_base_ns;
  std::string stem;
};

absl::StatusOr<Plan> plan_for(const TraceSelection& selection, const std::vector<HostFile>& files,
                              const StepExtent& step) {
  std::optional<int64_t> capture_start, first_event;
  for (const HostFile& f : files) {
    if (f.capture_start_ns) capture_start = std::min(capture_start.value_or(*f.capture_start_ns), *f.capture_start_ns);
    if (f.first_event_ns) first_event = std::min(first_event.value_or(*f.first_event_ns), *f.first_event_ns);
  }
  Plan plan;
  switch (selection.kind) {
    case TraceSelection::Kind::kWhole:
      plan.time_base_ns = capture_start;
      plan.stem = kPodTraceStem;
      return plan;
    case TraceSelection::Kind::kMilliseconds: {
      // The capture's start as recorded (podscope's captures), else its first event (TensorFlow's files).
      const std::optional<int64_t> origin = capture_start ? capture_start : first_event;
      if (!origin) return absl::NotFoundError("the run holds no event, so a window in ms has nothing to show");
      plan.window = TraceWindow{*origin + static_cast<int64_t>(selection.from_ms * 1e6),
                                *origin + static_cast<int64_t>(selection.to_ms * 1e6)};
      plan.time_base_ns = plan.window->start_ns;
      plan.stem = std::string(kPodTraceStem) + "." + window_bound_text(selection.from_ms) + "-" +
                  window_bound_text(selection.to_ms) + "ms";
      break;
    }
    case TraceSelection::Kind::kStep:
      if (!step.found()) {
        return absl::NotFoundError("step " + std::to_string(selection.step_num) +
                                   " is no whole step of any core of the run (steps from Steps lines, group ids, host "
                                   "step markers or NVTX ranges; partial steps at the capture's edges are left out)");
      }
      plan.window = TraceWindow{step.start_ns, step.end_ns};
      plan.time_base_ns = step.start_ns;
      plan.stem = std::string(kPodTraceStem) + ".step" + std::to_string(selection.step_num);
      break;
  }
  return plan;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PodTraceWriter>> PodTraceWriter::open(const run_directory::RunDirectory& run,
                                                                     std::string_view stem,
                                                                     std::optional<int64_t> time_base_ns,
                                                                     std::optional<TraceWindow> window) {
  std::unique_ptr<PodTraceWriter> writer(new PodTraceWriter(time_base_ns, window));
  const std::string json_name = std::string(stem) + ".trace.json.gz";
  const std::string perfetto_name = std::string(stem) + ".perfetto-trace";
  writer->files_.json = run.location_of(json_name);
  writer->files_.perfetto = run.location_of(perfetto_name);
  if (auto s = run.open_streamed(json_name, run_directory::StreamedFile::Compression::kGzip, writer->json_file_);
      !s.ok()) {
    return s;
  }
  if (auto s =
          run.open_streamed(perfetto_name, run_directory::StreamedFile::Compression::kNone, writer->perfetto_file_);
      !s.ok()) {
    return s;
  }
  return writer;
}

void PodTraceWriter::add_plane(const PlaneOrigin& origin, const XPlane& plane) {
  json_.add_plane(origin, plane);
  perfetto_.add_plane(origin, plane);
}

absl::StatusOr<PodTraceFiles> PodTraceWriter::commit() {
  json_.finish();
  perfetto_.finish();
  if (auto s = json_file_.commit(); !s.ok()) return s;
  if (auto s = perfetto_file_.commit(); !s.ok()) return s;
  files_.counts = perfetto_.counts();
  return files_;
}

absl::StatusOr<TraceSelection> parse_trace_selection(std::string_view text) {
  TraceSelection selection;
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError("trace window \"" + std::string(text) + "\" is neither A:B (ms) nor step:N");
  }
  const std::string_view left = text.substr(0, colon), right = text.substr(colon + 1);
  if (left == "step") {
    int64_t step = 0;
    const auto [end, ec] = std::from_chars(right.data(), right.data() + right.size(), step);
    if (ec != std::errc() || end != right.data() + right.size() || right.empty()) {
      return absl::InvalidArgumentError("trace window \"" + std::string(text) + "\": step \"" + std::string(right) +
                                        "\" is not an integer");
    }
    selection.kind = TraceSelection::Kind::kStep;
    selection.step_num = step;
    return selection;
  }
  const auto from = parse_double(left), to = parse_double(right);
  if (!from || !to || *from < 0 || *to <= *from) {
    return absl::InvalidArgumentError("trace window \"" + std::string(text) +
                                      "\" is not A:B with 0 <= A < B (ms from the capture's start)");
  }
  selection.kind = TraceSelection::Kind::kMilliseconds;
  selection.from_ms = *from;
  selection.to_ms = *to;
  return selection;
}

absl::StatusOr<PodTraceFiles> write_run_traces(const run_directory::RunDirectory& run,
                                               const TraceSelection& selection) {
  run_directory::RunFileReader files;
  return write_run_traces(run, selection, files);
}

absl::StatusOr<PodTraceFiles> write_run_traces(const run_directory::RunDirectory& run, const TraceSelection& selection,
                                               run_directory::RunFileReader& reader) {
  auto run_files = run_directory::list_run_files(run);
  if (!run_files.ok()) return run_files.status();
  return write_traces(*run_files, run, selection, reader);
}

absl::StatusOr<PodTraceFiles> write_traces(const std::vector<run_directory::RunFile>& run_files,
                                           const run_directory::RunDirectory& output, const TraceSelection& selection,
                                           run_directory::RunFileReader& reader) {
  std::vector<HostFile> files;
  std::vector<std::string> skipped;
  StepExtent extent;
  for (const run_directory::RunFile& run_file : run_files) {
    auto file = read_host_file(reader, run_file, selection, extent);
    if (file.ok()) {
      files.push_back(std::move(*file));
    } else {
      skipped.emplace_back(file.status().message());
    }
  }
  if (files.empty()) return absl::DataLossError("no file of " + output.location() + " could be read");
  auto plan = plan_for(selection, files, extent);
  if (!plan.ok()) return plan.status();

  auto writer = PodTraceWriter::open(output, plan->stem, plan->time_base_ns, plan->window);
  if (!writer.ok()) return writer.status();
  for (const HostFile& file : files) {
    absl::Status status = reader.read_planes(file.file, [&](const XPlane& plane) {
      const xspace::XPlaneReader reader(plane);
      // A plane's own host name and offset win over its file's (as in the analysis).
      const auto own_host = reader.str_stat(xspace::kHostNameStat);
      const PlaneOrigin origin{own_host.value_or(file.host_name),
                               reader.int_stat(xspace::kClockOffsetStat).value_or(file.clock_offset_ns)};
      (*writer)->add_plane(origin, plane);
      return absl::OkStatus();
    });
    if (!status.ok()) skipped.emplace_back(status.message());
  }
  absl::StatusOr<PodTraceFiles> written = (*writer)->commit();
  if (written.ok()) written->skipped_files = std::move(skipped);
  return written;
}

}  // namespace podscope::pod_capture
