#include "trace_writers/pod_trace.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <vector>

#include "analysis/runner/analysis_runner.h"
#include "kineto/trace_file.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace podscope::pod_capture {
namespace {

namespace fs = std::filesystem;
using tensorflow::profiler::XPlane;

constexpr std::string_view kXSpaceSuffix = ".xplane.pb";

// What a host file says about itself, read before its events.
struct RunFile {
  fs::path path;
  std::string host_name;
  int64_t clock_offset_ns = 0;
  std::optional<int64_t> capture_start_ns;  // coordinator clock
};

// The first and last instant of one step over every core, coordinator clock.
struct StepExtent {
  int64_t start_ns = std::numeric_limits<int64_t>::max();
  int64_t end_ns = std::numeric_limits<int64_t>::min();
  bool found() const { return start_ns <= end_ns; }
};

// Reads the plane stats of `path` (and, for `step`, its device planes' Steps lines, extending `extent`).
absl::StatusOr<RunFile> read_run_file(const fs::path& path, std::optional<int64_t> step, StepExtent& extent) {
  RunFile file;
  file.path = path;
  std::optional<std::string> host_name;
  std::optional<int64_t> offset, host_plane_offset, capture_start;
  struct StepSpan {
    int64_t start_ns, end_ns;
    std::optional<int64_t> plane_offset;
  };
  std::vector<StepSpan> step_spans;
  xspace::XSpaceHeader header;
  const auto keep_line = [&](std::string_view plane_name, std::string_view line_name) {
    return step && line_name == xspace::kStepsLineName && plane_name != xspace::kHostPlaneName;
  };
  absl::Status status = kineto::read_run_file_planes(
      path,
      [&](const XPlane& plane) {
        const xspace::XPlaneReader reader(plane);
        const auto plane_offset = reader.int_stat(xspace::kClockOffsetStat);
        if (plane.name() == xspace::kHostPlaneName) {
          if (auto name = reader.str_stat(xspace::kHostNameStat)) host_name = std::string(*name);
          host_plane_offset = plane_offset;
          capture_start = reader.int_stat(xspace::kCaptureStartStat);
        } else if (!offset) {
          offset = plane_offset;
        }
        if (const auto* line = step ? reader.find_line(xspace::kStepsLineName) : nullptr) {
          reader.for_each_event(*line, [&](const xspace::XEventView& e) {
            if (e.int_stat(xspace::kStepNumStat) == step) {
              step_spans.push_back({e.start_ns(), e.end_ns(), plane_offset});
            }
          });
        }
        return absl::OkStatus();
      },
      &header, keep_line);
  if (!status.ok()) return status;
  file.clock_offset_ns = host_plane_offset.value_or(offset.value_or(0));
  if (capture_start) file.capture_start_ns = *capture_start - file.clock_offset_ns;
  if (host_name) {
    file.host_name = *host_name;
  } else if (!header.hostnames.empty()) {
    file.host_name = header.hostnames.front();
  } else {
    const std::string name = path.filename().string();
    const size_t stem =
        name.ends_with(kXSpaceSuffix) ? name.size() - kXSpaceSuffix.size() : name.rfind(".pt.trace.json");
    file.host_name = name.substr(0, stem);
  }
  for (const StepSpan& s : step_spans) {
    const int64_t plane_offset = s.plane_offset.value_or(file.clock_offset_ns);
    extent.start_ns = std::min(extent.start_ns, s.start_ns - plane_offset);
    extent.end_ns = std::max(extent.end_ns, s.end_ns - plane_offset);
  }
  return file;
}

std::optional<double> parse_double(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string format_ms(double ms) {
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

absl::StatusOr<Plan> plan_for(const TraceSelection& selection, const std::vector<RunFile>& files,
                              const StepExtent& step) {
  std::optional<int64_t> capture_start;
  for (const RunFile& f : files) {
    if (f.capture_start_ns) capture_start = std::min(capture_start.value_or(*f.capture_start_ns), *f.capture_start_ns);
  }
  Plan plan;
  switch (selection.kind) {
    case TraceSelection::Kind::kWhole:
      plan.time_base_ns = capture_start;
      plan.stem = kPodTraceStem;
      return plan;
    case TraceSelection::Kind::kMilliseconds:
      if (!capture_start) {
        return absl::FailedPreconditionError(
            "the run records no capture start (" + std::string(xspace::kCaptureStartStat) + " on " +
            std::string(xspace::kHostPlaneName) + "), so a window in ms from it has no origin; use step:N");
      }
      plan.window = TraceWindow{*capture_start + static_cast<int64_t>(selection.from_ms * 1e6),
                                *capture_start + static_cast<int64_t>(selection.to_ms * 1e6)};
      plan.time_base_ns = plan.window->start_ns;
      plan.stem =
          std::string(kPodTraceStem) + "." + format_ms(selection.from_ms) + "-" + format_ms(selection.to_ms) + "ms";
      break;
    case TraceSelection::Kind::kStep:
      if (!step.found()) {
        return absl::NotFoundError("step " + std::to_string(selection.step_num) + " is on no Steps line of the run");
      }
      plan.window = TraceWindow{step.start_ns, step.end_ns};
      plan.time_base_ns = step.start_ns;
      plan.stem = std::string(kPodTraceStem) + ".step" + std::to_string(selection.step_num);
      break;
  }
  return plan;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PodTraceWriter>> PodTraceWriter::open(const fs::path& dir, std::string_view stem,
                                                                     std::optional<int64_t> time_base_ns,
                                                                     std::optional<TraceWindow> window) {
  std::unique_ptr<PodTraceWriter> writer(new PodTraceWriter(time_base_ns, window));
  writer->files_.json = dir / (std::string(stem) + ".trace.json.gz");
  writer->files_.perfetto = dir / (std::string(stem) + ".perfetto-trace");
  if (auto s = writer->json_file_.open(writer->files_.json, StreamedFile::Compression::kGzip); !s.ok()) return s;
  if (auto s = writer->perfetto_file_.open(writer->files_.perfetto, StreamedFile::Compression::kNone); !s.ok()) {
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

absl::StatusOr<PodTraceFiles> write_run_traces(const fs::path& run_dir, const TraceSelection& selection) {
  auto paths = analysis::list_run_files(run_dir);
  if (!paths.ok()) return paths.status();
  const std::optional<int64_t> step =
      selection.kind == TraceSelection::Kind::kStep ? std::optional(selection.step_num) : std::nullopt;
  std::vector<RunFile> files;
  std::vector<std::string> skipped;
  StepExtent extent;
  for (const fs::path& path : *paths) {
    auto file = read_run_file(path, step, extent);
    if (file.ok()) {
      files.push_back(std::move(*file));
    } else {
      skipped.emplace_back(file.status().message());
    }
  }
  if (files.empty()) return absl::DataLossError("no file of " + run_dir.string() + " could be read");
  auto plan = plan_for(selection, files, extent);
  if (!plan.ok()) return plan.status();

  auto writer = PodTraceWriter::open(run_dir, plan->stem, plan->time_base_ns, plan->window);
  if (!writer.ok()) return writer.status();
  for (const RunFile& file : files) {
    absl::Status status = kineto::read_run_file_planes(file.path, [&](const XPlane& plane) {
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
