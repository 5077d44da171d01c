#include "analysis/runner/analysis_runner.h"

#include <algorithm>
#include <memory>

#include "analysis/input_pipeline.h"
#include "analysis/overview_page.h"
#include "analysis/plane_walk.h"
#include "analysis/pod_steps.h"
#include "analysis/renderers.h"
#include "analysis/runner/tools.h"
#include "analysis/step_database.h"
#include "analysis/tool_pages.h"
#include "daemon/atomic_file.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace podscope::analysis {
namespace {

constexpr std::string_view kXSpaceSuffix = ".xplane.pb";

}  // namespace

absl::StatusOr<std::vector<std::filesystem::path>> list_run_files(const std::filesystem::path& run_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(run_dir, ec)) {
    return absl::NotFoundError("run directory " + run_dir.string() + " does not exist or is not a directory");
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && ((name.size() > kXSpaceSuffix.size() && name.ends_with(kXSpaceSuffix)) ||
                                    kineto::is_kineto_trace_file_name(name))) {
      files.push_back(entry.path());
    }
  }
  if (ec) return absl::InternalError("listing run directory " + run_dir.string() + ": " + ec.message());
  if (files.empty()) {
    return absl::NotFoundError("run directory " + run_dir.string() +
                               " has no *.xplane.pb files and no torch.profiler traces (*.pt.trace.json[.gz])");
  }
  // File order fixes the global core numbering of TF/JAX device planes.
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

// Everything that reads the planes as they stream past: the step database of the file being read, and the builder of
// every tool that reads the planes itself (ToolInput::kPlanes), in table order. Each plane is walked once for all
// of them.
struct PlaneConsumers {
  std::unique_ptr<HostStepDatabaseBuilder> steps;  // of the file being read
  std::vector<std::unique_ptr<PlaneToolBuilder>> tools;

  PlaneConsumers() {
    for (const Tool& tool : analysis_tools())
      if (tool.reads == ToolInput::kPlanes) tools.push_back(tool.builder());
  }

  // The plane read once for all of them: each adds its readers of the plane, one walk hands them its events.
  void read_plane(size_t file_index, const tensorflow::profiler::XPlane& plane) {
    const xspace::XPlaneReader reader(plane);
    std::vector<PlaneConsumer*> consumers = {steps.get()};
    for (auto& tool : tools) consumers.push_back(tool.get());
    std::vector<PlaneEventReader*> readers;
    for (PlaneConsumer* consumer : consumers) consumer->begin_plane(file_index, reader, readers);
    walk_plane(reader, readers);
    for (PlaneConsumer* consumer : consumers) consumer->end_plane(file_index);
  }

  static bool wants_line(std::string_view plane_name, std::string_view line_name) {
    if (HostStepDatabaseBuilder::wants_line(plane_name, line_name)) return true;
    for (const Tool& tool : analysis_tools())
      if (tool.reads == ToolInput::kPlanes && tool.wants_line(plane_name, line_name)) return true;
    return false;
  }
};

// Feeds one file's planes to the analyzers and adds its host's step database to `hosts`. A broken file (truncated,
// lengths that lie, an empty file) gives them nothing: the reader checks a file's structure before its first plane.
// The error names the file and where it broke.
absl::Status read_into(PlaneConsumers& consumers, kineto::RunFileReader& files, size_t index,
                       const std::filesystem::path& file, std::vector<podscope::v1::HostStepDatabase>& hosts) {
  std::error_code ec;
  if (std::filesystem::file_size(file, ec) == 0 && !ec) return absl::DataLossError(file.string() + " is empty");
  consumers.steps = std::make_unique<HostStepDatabaseBuilder>();
  xspace::XSpaceHeader header;
  absl::Status status = files.read_planes(
      file,
      [&](const tensorflow::profiler::XPlane& plane) {
        consumers.read_plane(index, plane);
        return absl::OkStatus();
      },
      &header, PlaneConsumers::wants_line);
  if (!status.ok()) return status;
  // The file's names: its stem names the host when its planes do not.
  const std::string stem = kineto::run_file_stem(file.filename().string());
  hosts.push_back(std::move(*consumers.steps).finish(header.hostnames, stem));
  for (auto& tool : consumers.tools) tool->end_file(index, header.hostnames, stem);
  return absl::OkStatus();
}

// Writes one output file atomically and records it. Unsynced: the outputs are made again from the run's files,
// and syncing each of them cost more than the analysis of a small run.
absl::Status write_output(const std::filesystem::path& run_dir, std::string_view name, const std::string& content,
                          AnalysisOutcome& outcome) {
  const std::filesystem::path path = run_dir / name;
  if (absl::Status s = write_file_atomically(path, content, Durability::kRebuildable); !s.ok()) return s;
  outcome.written_files.push_back(path);
  return absl::OkStatus();
}

// Every tool's files, then report.html with a tab per tool.
absl::Status write_outputs(const std::filesystem::path& run_dir, const AnalysisOptions& options,
                           AnalysisOutcome& outcome) {
  for (const Tool& tool : analysis_tools()) {
    for (ToolFile& file : tool.files(outcome)) {
      if (!file.content.ok()) return file.content.status();
      if (absl::Status s = write_output(run_dir, file.name, *file.content, outcome); !s.ok()) return s;
    }
  }
  const std::string title =
      options.report_title.empty() ? "podscope pod analysis: " + run_dir.filename().string() : options.report_title;
  absl::StatusOr<std::string> html = render_report_html(report_tabs(outcome), title);
  if (!html.ok()) return html.status();
  return write_output(run_dir, "report.html", *html, outcome);
}

}  // namespace

void run_step_tools(const PodAnalyzerOptions& options, AnalysisOutcome& outcome) {
  const PodSteps pod = merge_step_databases(outcome.step_databases);
  outcome.analysis = analyze_pod_steps(pod, options);
  outcome.input_pipeline = pod_steps_to_input_pipeline(pod);
  outcome.overview_page = pod_steps_to_overview_page(pod, outcome.input_pipeline);
  outcome.recommendation_text = render_overview_recommendation_text(outcome.overview_page);
}

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const std::filesystem::path& run_dir,
                                                      const AnalysisOptions& options) {
  kineto::RunFileReader files;
  return analyze_run_directory(run_dir, options, files);
}

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const std::filesystem::path& run_dir,
                                                      const AnalysisOptions& options, kineto::RunFileReader& files) {
  absl::StatusOr<AnalysisOutcome> outcome = analyze_run_files(run_dir, options.analyzer, files);
  if (!outcome.ok()) return outcome.status();
  const absl::Status written = write_outputs(run_dir, options, *outcome);
  if (written.ok()) return outcome;
  // Some outputs beside others missing would pass for a whole analysis: none stays (a full disk is the usual
  // cause, and `podscope analyze` writes them all again once there is room).
  for (const std::filesystem::path& path : outcome->written_files) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
  return absl::AbortedError("the analysis outputs could not be written, none was kept: " +
                            std::string(written.message()));
}

absl::StatusOr<AnalysisOutcome> analyze_run_files(const std::filesystem::path& run_dir,
                                                  const PodAnalyzerOptions& options) {
  kineto::RunFileReader files;
  return analyze_run_files(run_dir, options, files);
}

absl::StatusOr<AnalysisOutcome> analyze_run_files(const std::filesystem::path& run_dir,
                                                  const PodAnalyzerOptions& options, kineto::RunFileReader& files) {
  absl::StatusOr<std::vector<std::filesystem::path>> paths = list_run_files(run_dir);
  if (!paths.ok()) return paths.status();
  AnalysisOutcome outcome;
  PlaneConsumers consumers;
  for (size_t i = 0; i < paths->size(); ++i) {
    if (absl::Status s = read_into(consumers, files, i, (*paths)[i], outcome.step_databases); !s.ok()) {
      outcome.bad_files.emplace_back(s.message());
    }
  }
  if (outcome.bad_files.size() == paths->size()) {
    std::string all;
    for (const auto& bad : outcome.bad_files) all += "\n  " + bad;
    return absl::DataLossError("no file of " + run_dir.string() + " could be read:" + all);
  }
  run_step_tools(options, outcome);
  for (auto& tool : consumers.tools) std::move(*tool).finish(outcome);
  outcome.summary_text = render_summary_text(outcome.analysis);
  outcome.summary_text += render_op_tool_warnings(outcome.kernel_stats, outcome.memory_profile, outcome.op_stats);
  for (const auto& bad : outcome.bad_files) outcome.summary_text += "warning: file skipped: " + bad + "\n";
  return outcome;
}

}  // namespace podscope::analysis
