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
#include "daemon/atomic_file.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace podscope::analysis {
namespace {

constexpr std::string_view kXSpaceSuffix = ".xplane.pb";

bool is_xspace_file_name(std::string_view name) {
  return name.size() > kXSpaceSuffix.size() && name.ends_with(kXSpaceSuffix);
}

// A JSON file that a capture or an analysis wrote into the run: capture.json, the pod traces (pod.trace.json.gz,
// pod.<window>.trace.json.gz) and each tool's result, which is written as <stem>.pb beside <stem>.json.
bool is_run_output(const std::filesystem::path& dir, std::string_view name) {
  if (name == "capture.json" || (name.starts_with("pod.") && name.ends_with(".trace.json.gz"))) return true;
  if (!name.ends_with(".json")) return false;
  const std::string stem(name.substr(0, name.size() - std::string_view(".json").size()));
  std::error_code ec;
  return std::filesystem::is_regular_file(dir / (stem + ".pb"), ec) ||
         (stem.ends_with(".pb") && std::filesystem::is_regular_file(dir / stem, ec));
}

}  // namespace

absl::StatusOr<std::vector<std::filesystem::path>> list_run_files(const std::filesystem::path& run_dir,
                                                                  std::vector<std::string>* notes) {
  std::error_code ec;
  if (!std::filesystem::is_directory(run_dir, ec)) {
    return absl::NotFoundError("run directory " + run_dir.string() + " does not exist or is not a directory");
  }
  std::vector<std::filesystem::path> files;
  std::vector<std::string> ignored;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file()) continue;
    if (is_xspace_file_name(name) || kineto::is_kineto_trace_file_name(name)) {
      files.push_back(entry.path());
    } else if (kineto::is_json_file_name(name) && !is_run_output(run_dir, name)) {
      // Any other JSON file is read if its content is a Chrome trace, as HTA and Perfetto's UI read it.
      if (kineto::is_chrome_trace_file(entry.path())) files.push_back(entry.path());
      else ignored.push_back(name);
    }
  }
  if (ec) return absl::InternalError("listing run directory " + run_dir.string() + ": " + ec.message());
  if (files.empty()) {
    return absl::NotFoundError("run directory " + run_dir.string() +
                               " has no *.xplane.pb files and no Chrome traces (*.json[.gz] with traceEvents, as "
                               "torch.profiler writes)");
  }
  // File order fixes the global core numbering of TF/JAX device planes.
  std::sort(files.begin(), files.end());
  std::sort(ignored.begin(), ignored.end());
  if (notes != nullptr) {
    for (const std::string& name : ignored) {
      notes->push_back("ignored " + name + ": not a Chrome trace (no traceEvents array in its first " +
                       std::to_string(kineto::kChromeTraceHeadBytes >> 10) + " KiB)");
    }
  }
  return files;
}

absl::StatusOr<std::vector<std::filesystem::path>> check_run_files(std::vector<std::filesystem::path> files) {
  for (const std::filesystem::path& file : files) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) return absl::NotFoundError(file.string() + " is not a file");
    const std::string name = file.filename().string();
    if (!is_xspace_file_name(name) && !kineto::is_kineto_trace_file_name(name) && !kineto::is_chrome_trace_file(file)) {
      return absl::InvalidArgumentError(
          file.string() + " is neither an XSpace (*.xplane.pb) nor a Chrome trace (JSON with traceEvents)");
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

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
absl::Status read_into(PlaneConsumers& consumers, kineto::RunFileReader& files, size_t index,
                       const std::filesystem::path& file) {
  PodAnalyzer& analyzer = consumers.pod;
  std::error_code ec;
  if (std::filesystem::file_size(file, ec) == 0 && !ec) return absl::DataLossError(file.string() + " is empty");
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

// Writes the outcome's files into `output_dir`, all or none.
absl::StatusOr<AnalysisOutcome> write_all(absl::StatusOr<AnalysisOutcome> outcome,
                                          const std::filesystem::path& output_dir, const AnalysisOptions& options) {
  if (!outcome.ok()) return outcome.status();
  const absl::Status written = write_outputs(output_dir, options, *outcome);
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

// Reads and analyses `paths` (`what` names them in errors); `notes` say what was left out.
absl::StatusOr<AnalysisOutcome> analyze_paths(const std::vector<std::filesystem::path>& paths,
                                              const std::vector<std::string>& notes, std::string_view what,
                                              const PodAnalyzerOptions& options, kineto::RunFileReader& files) {
  AnalysisOutcome outcome;
  PlaneConsumers consumers(options);
  for (size_t i = 0; i < paths.size(); ++i) {
    if (absl::Status s = read_into(consumers, files, i, paths[i]); !s.ok()) {
      outcome.bad_files.emplace_back(s.message());
    }
  }
  if (outcome.bad_files.size() == paths.size()) {
    std::string all;
    for (const auto& bad : outcome.bad_files) all += "\n  " + bad;
    return absl::DataLossError("no file of " + std::string(what) + " could be read:" + all);
  }
  outcome.analysis = std::move(consumers.pod).finish();
  run_step_tools(std::move(consumers.steps).finish(), outcome);
  for (auto& tool : consumers.tools) std::move(*tool).finish(outcome);
  outcome.summary_text = render_summary_text(outcome.analysis);
  outcome.summary_text += render_op_tool_warnings(outcome.kernel_stats, outcome.memory_profile, outcome.op_stats);
  for (const auto& bad : outcome.bad_files) outcome.summary_text += "warning: file skipped: " + bad + "\n";
  for (const auto& note : notes) outcome.summary_text += "note: " + note + "\n";
  return outcome;
}

}  // namespace

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const std::filesystem::path& run_dir,
                                                      const AnalysisOptions& options) {
  kineto::RunFileReader files;
  return analyze_run_directory(run_dir, options, files);
}

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const std::filesystem::path& run_dir,
                                                      const AnalysisOptions& options, kineto::RunFileReader& files) {
  return write_all(analyze_run_files(run_dir, options.analyzer, files), run_dir, options);
}

absl::StatusOr<AnalysisOutcome> analyze_files(const std::vector<std::filesystem::path>& paths,
                                              const std::filesystem::path& output_dir, const AnalysisOptions& options,
                                              kineto::RunFileReader& files) {
  absl::StatusOr<std::vector<std::filesystem::path>> checked = check_run_files(paths);
  if (!checked.ok()) return checked.status();
  return write_all(analyze_paths(*checked, {}, "the files given", options.analyzer, files), output_dir, options);
}

absl::StatusOr<AnalysisOutcome> analyze_run_files(const std::filesystem::path& run_dir,
                                                  const PodAnalyzerOptions& options) {
  kineto::RunFileReader files;
  return analyze_run_files(run_dir, options, files);
}

absl::StatusOr<AnalysisOutcome> analyze_run_files(const std::filesystem::path& run_dir,
                                                  const PodAnalyzerOptions& options, kineto::RunFileReader& files) {
  std::vector<std::string> notes;
  absl::StatusOr<std::vector<std::filesystem::path>> paths = list_run_files(run_dir, &notes);
  if (!paths.ok()) return paths.status();
  return analyze_paths(*paths, notes, run_dir.string(), options, files);
}

}  // namespace podscope::analysis
