#include "analysis/runner/analysis_runner.h"

#include <algorithm>
#include <memory>

#include "analysis/rendering/renderers.h"
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
  for (const auto& result : outcome.results) {
    for (ToolFile& file : result->files(outcome)) {
      if (!file.content.ok()) return file.content.status();
      if (absl::Status s = write_output(run_dir, file.name, *file.content, outcome); !s.ok()) return s;
    }
  }
  const std::string title =
      options.report_title.empty() ? "podscope pod analysis: " + run_dir.filename().string() : options.report_title;
  absl::StatusOr<std::vector<ReportTab>> tabs = report_tabs(outcome);
  if (!tabs.ok()) return tabs.status();
  return write_output(run_dir, "report.html", render_report_html(*tabs, title), outcome);
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
  std::vector<podscope::v1::HostAnalysis> hosts;
  std::vector<std::string> bad_files;
  for (const std::filesystem::path& path : paths) {
    absl::StatusOr<podscope::v1::HostAnalysis> host = analyze_host_file(path, files);
    if (host.ok()) {
      hosts.push_back(*std::move(host));
    } else {
      bad_files.emplace_back(host.status().message());
    }
  }
  if (hosts.empty()) {
    std::string all;
    for (const auto& bad : bad_files) all += "\n  " + bad;
    return absl::DataLossError("no file of " + std::string(what) + " could be read:" + all);
  }
  AnalysisOutcome outcome = merge_host_analyses(std::move(hosts), options);
  for (const auto& bad : bad_files) outcome.summary_text += "warning: file skipped: " + bad + "\n";
  outcome.bad_files = std::move(bad_files);
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

absl::StatusOr<podscope::v1::HostAnalysis> analyze_host_file(const std::filesystem::path& file,
                                                             kineto::RunFileReader& files) {
  std::error_code ec;
  if (std::filesystem::file_size(file, ec) == 0 && !ec) return absl::DataLossError(file.string() + " is empty");
  HostAnalysisBuilder host;
  xspace::XSpaceHeader header;
  absl::Status status = files.read_planes(
      file,
      [&](const tensorflow::profiler::XPlane& plane) {
        host.read_plane(plane);
        return absl::OkStatus();
      },
      &header, HostAnalysisBuilder::wants_line);
  if (!status.ok()) return status;
  // The file's stem names the host when its planes do not.
  absl::StatusOr<podscope::v1::HostAnalysis> analysis =
      std::move(host).finish(header.hostnames, kineto::run_file_stem(file.filename().string()));
  if (!analysis.ok())
    return absl::Status(analysis.status().code(), file.string() + ": " + std::string(analysis.status().message()));
  return analysis;
}

absl::StatusOr<AnalysisOutcome> analyze_run_files(const std::filesystem::path& run_dir,
                                                  const PodAnalyzerOptions& options, kineto::RunFileReader& files) {
  std::vector<std::string> notes;
  absl::StatusOr<std::vector<std::filesystem::path>> paths = list_run_files(run_dir, &notes);
  if (!paths.ok()) return paths.status();
  return analyze_paths(*paths, notes, run_dir.string(), options, files);
}

}  // namespace podscope::analysis
