#include "analysis/runner/analysis_runner.h"

#include <algorithm>
#include <memory>

#include "analysis/input_pipeline.h"
#include "analysis/overview_page.h"
#include "analysis/plane_walk.h"
#include "analysis/renderers.h"
#include "analysis/runner/tools.h"
#include "analysis/step_model.h"
#include "analysis/tool_pages.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace podscope::analysis {
namespace {

// Everything that reads the planes as they stream past: the pod analyzer, the step model, and the builder of every
// tool that reads the planes itself (ToolInput::kPlanes), in table order. Each plane is walked once for all of them.
struct PlaneConsumers {
  PodAnalyzer pod;
  StepModelBuilder steps;
  std::vector<std::unique_ptr<PlaneToolBuilder>> tools;

  explicit PlaneConsumers(const PodAnalyzerOptions& options) : pod(options) {
    for (const Tool& tool : analysis_tools())
      if (tool.reads == ToolInput::kPlanes) tools.push_back(tool.builder());
  }

  // The plane read once for all of them: each adds its readers of the plane, one walk hands them its events.
  void read_plane(size_t file_index, const tensorflow::profiler::XPlane& plane) {
    const xspace::XPlaneReader reader(plane);
    std::vector<PlaneConsumer*> consumers = {&pod, &steps};
    for (auto& tool : tools) consumers.push_back(tool.get());
    std::vector<PlaneEventReader*> readers;
    for (PlaneConsumer* consumer : consumers) consumer->begin_plane(file_index, reader, readers);
    walk_plane(reader, readers);
    for (PlaneConsumer* consumer : consumers) consumer->end_plane(file_index);
  }

  static bool wants_line(std::string_view plane_name, std::string_view line_name) {
    if (PodAnalyzer::wants_line(plane_name, line_name) || StepModelBuilder::wants_line(plane_name, line_name))
      return true;
    for (const Tool& tool : analysis_tools())
      if (tool.reads == ToolInput::kPlanes && tool.wants_line(plane_name, line_name)) return true;
    return false;
  }
};

// Feeds one file's planes to the analyzers. A broken file (truncated, lengths that lie, an empty file) gives them
// nothing: the reader checks a file's structure before its first plane. The error names the file and where it broke.
absl::Status read_into(PlaneConsumers& consumers, run_directory::RunFileReader& files,
                       const run_directory::RunDirectory& run, size_t index, const run_directory::RunFile& file) {
  PodAnalyzer& analyzer = consumers.pod;
  if (file.size == 0) return absl::DataLossError(run.location_of(file.name) + " is empty");
  xspace::XSpaceHeader header;
  absl::Status status = files.read_planes(
      run, file,
      [&](const tensorflow::profiler::XPlane& plane) {
        consumers.read_plane(index, plane);
        return absl::OkStatus();
      },
      &header, PlaneConsumers::wants_line);
  if (!status.ok()) return status;
  // The file's names: its stem names the host when its planes do not.
  const std::string stem = run_directory::file_stem(file.name);
  analyzer.add_file_names(index, header.hostnames, stem);
  consumers.steps.add_file_names(index, header.hostnames, stem);
  for (auto& tool : consumers.tools) tool->end_file(index, header.hostnames, stem);
  // Device planes without steps of their own take them from the host plane's step markers, which the step model
  // read as the host plane passed.
  if (analyzer.awaits_host_markers(index)) analyzer.add_host_markers(index, consumers.steps.host_step_markers(index));
  // The host work the step model read fills the pod viewer's idle time as it fills the step tools'.
  analyzer.add_host_work(index, consumers.steps.end_file(index));
  return absl::OkStatus();
}

// The step tools from the step model: the overview embeds the input pipeline's analysis.
void run_step_tools(StepModel model, AnalysisOutcome& outcome) {
  outcome.input_pipeline = step_model_to_input_pipeline(model);
  outcome.overview_page = step_model_to_overview_page(model, outcome.input_pipeline);
  outcome.recommendation_text = render_overview_recommendation_text(outcome.overview_page);
}

// Writes one output file atomically and records it. Unsynced: the outputs are made again from the run's files,
// and syncing each of them cost more than the analysis of a small run.
absl::Status write_output(const run_directory::RunDirectory& run, std::string_view name, const std::string& content,
                          AnalysisOutcome& outcome) {
  if (absl::Status s = run.write(name, content, Durability::kRebuildable); !s.ok()) return s;
  outcome.written_files.push_back(run.location_of(name));
  return absl::OkStatus();
}

// Every tool's files, then report.html with a tab per tool.
absl::Status write_outputs(const run_directory::RunDirectory& run, const AnalysisOptions& options,
                           AnalysisOutcome& outcome) {
  for (const Tool& tool : analysis_tools()) {
    for (ToolFile& file : tool.files(outcome)) {
      if (!file.content.ok()) return file.content.status();
      if (absl::Status s = write_output(run, file.name, *file.content, outcome); !s.ok()) return s;
    }
  }
  const std::string title =
      options.report_title.empty() ? "podscope pod analysis: " + run.name() : options.report_title;
  absl::StatusOr<std::string> html = render_report_html(report_tabs(outcome), title);
  if (!html.ok()) return html.status();
  return write_output(run, "report.html", *html, outcome);
}

}  // namespace

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const run_directory::RunDirectory& run,
                                                      const AnalysisOptions& options) {
  run_directory::RunFileReader files;
  return analyze_run_directory(run, options, files);
}

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const run_directory::RunDirectory& run,
                                                      const AnalysisOptions& options,
                                                      run_directory::RunFileReader& files) {
  absl::StatusOr<AnalysisOutcome> outcome = analyze_run_files(run, options.analyzer, files);
  if (!outcome.ok()) return outcome.status();
  const absl::Status written = write_outputs(run, options, *outcome);
  if (written.ok()) return outcome;
  // Some outputs beside others missing would pass for a whole analysis: none stays (a full disk is the usual
  // cause, and `podscope analyze` writes them all again once there is room).
  for (const std::string& written : outcome->written_files) {
    run.remove(written.substr(written.rfind('/') + 1)).IgnoreError();
  }
  return absl::AbortedError("the analysis outputs could not be written, none was kept: " +
                            std::string(written.message()));
}

absl::StatusOr<AnalysisOutcome> analyze_run_files(const run_directory::RunDirectory& run,
                                                  const PodAnalyzerOptions& options) {
  run_directory::RunFileReader files;
  return analyze_run_files(run, options, files);
}

absl::StatusOr<AnalysisOutcome> analyze_run_files(const run_directory::RunDirectory& run,
                                                  const PodAnalyzerOptions& options,
                                                  run_directory::RunFileReader& files) {
  absl::StatusOr<std::vector<run_directory::RunFile>> run_files = run.profile_files();
  if (!run_files.ok()) return run_files.status();
  AnalysisOutcome outcome;
  PlaneConsumers consumers(options);
  for (size_t i = 0; i < run_files->size(); ++i) {
    if (absl::Status s = read_into(consumers, files, run, i, (*run_files)[i]); !s.ok()) {
      outcome.bad_files.emplace_back(s.message());
    }
  }
  if (outcome.bad_files.size() == run_files->size()) {
    std::string all;
    for (const auto& bad : outcome.bad_files) all += "\n  " + bad;
    return absl::DataLossError("no file of " + run.location() + " could be read:" + all);
  }
  outcome.analysis = std::move(consumers.pod).finish();
  run_step_tools(std::move(consumers.steps).finish(), outcome);
  for (auto& tool : consumers.tools) std::move(*tool).finish(outcome);
  outcome.summary_text = render_summary_text(outcome.analysis);
  outcome.summary_text += render_op_tool_warnings(outcome.kernel_stats, outcome.memory_profile, outcome.op_stats);
  for (const auto& bad : outcome.bad_files) outcome.summary_text += "warning: file skipped: " + bad + "\n";
  return outcome;
}

}  // namespace podscope::analysis
