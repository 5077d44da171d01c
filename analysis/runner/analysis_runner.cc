#include "analysis/runner/analysis_runner.h"

#include <algorithm>
#include <memory>

#include "analysis/rendering/renderers.h"
#include "daemon/atomic_file.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace podscope::analysis {
namespace {

using run_directory::RunDirectory;
using run_directory::RunFile;
using run_directory::RunFileReader;

// Writes one output file atomically and records it. Unsynced: the outputs are made again from the run's files,
// and syncing each of them cost more than the analysis of a small run.
absl::Status write_output(const RunDirectory& output, std::string_view name, const std::string& content,
                          AnalysisOutcome& outcome) {
  if (absl::Status s = output.write(name, content, Durability::kRebuildable); !s.ok()) return s;
  outcome.written_files.push_back(output.location_of(name));
  return absl::OkStatus();
}

// Every tool's files, then report.html with a tab per tool.
absl::Status write_outputs(const RunDirectory& output, const AnalysisOptions& options, AnalysisOutcome& outcome) {
  for (const auto& result : outcome.results) {
    for (ToolFile& file : result->files(outcome)) {
      if (!file.content.ok()) return file.content.status();
      if (absl::Status s = write_output(output, file.name, *file.content, outcome); !s.ok()) return s;
    }
  }
  const std::string title =
      options.report_title.empty() ? "podscope pod analysis: " + output.name() : options.report_title;
  absl::StatusOr<std::vector<ReportTab>> tabs = report_tabs(outcome);
  if (!tabs.ok()) return tabs.status();
  return write_output(output, "report.html", render_report_html(*tabs, title), outcome);
}

// Writes the outcome's files into `output`, all or none.
absl::StatusOr<AnalysisOutcome> write_all(absl::StatusOr<AnalysisOutcome> outcome, const RunDirectory& output,
                                          const AnalysisOptions& options) {
  if (!outcome.ok()) return outcome.status();
  const absl::Status written = write_outputs(output, options, *outcome);
  if (written.ok()) return outcome;
  // Some outputs beside others missing would pass for a whole analysis: none stays (a full disk is the usual
  // cause, and `podscope analyze` writes them all again once there is room).
  for (const std::string& location : outcome->written_files) {
    output.remove(location.substr(location.rfind('/') + 1)).IgnoreError();
  }
  return absl::AbortedError("the analysis outputs could not be written, none was kept: " +
                            std::string(written.message()));
}

// The pod's analysis from its hosts' (`what` names their files in errors); `notes` say what was left out.
absl::StatusOr<AnalysisOutcome> merge_hosts(std::vector<podscope::v1::HostAnalysis> hosts,
                                            std::vector<std::string> bad_files, const std::vector<std::string>& notes,
                                            std::string_view what, const PodAnalyzerOptions& options) {
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

// Reads and analyses `run_files` (`what` names them in errors); `notes` say what was left out.
absl::StatusOr<AnalysisOutcome> analyze_each(const std::vector<RunFile>& run_files,
                                             const std::vector<std::string>& notes, std::string_view what,
                                             const PodAnalyzerOptions& options, RunFileReader& files) {
  std::vector<podscope::v1::HostAnalysis> hosts;
  std::vector<std::string> bad_files;
  for (const RunFile& file : run_files) {
    absl::StatusOr<podscope::v1::HostAnalysis> host = analyze_host_file(file, files);
    if (host.ok()) {
      hosts.push_back(*std::move(host));
    } else {
      bad_files.emplace_back(host.status().message());
    }
  }
  return merge_hosts(std::move(hosts), std::move(bad_files), notes, what, options);
}

}  // namespace

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const RunDirectory& run, const AnalysisOptions& options) {
  RunFileReader files;
  return analyze_run_directory(run, options, files);
}

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const RunDirectory& run, const AnalysisOptions& options,
                                                      RunFileReader& files) {
  return write_all(analyze_run_files(run, options.analyzer, files), run, options);
}

absl::StatusOr<AnalysisOutcome> analyze_files(const std::vector<RunFile>& given, const RunDirectory& output,
                                              const AnalysisOptions& options, RunFileReader& files) {
  return write_all(analyze_each(given, {}, "the files given", options.analyzer, files), output, options);
}

absl::StatusOr<AnalysisOutcome> write_analysis_of_hosts(std::vector<podscope::v1::HostAnalysis> hosts,
                                                        std::vector<std::string> bad_files, const RunDirectory& run,
                                                        const AnalysisOptions& options) {
  return write_all(merge_hosts(std::move(hosts), std::move(bad_files), {}, run.location(), options.analyzer), run,
                   options);
}

absl::StatusOr<AnalysisOutcome> analyze_run_files(const RunDirectory& run, const PodAnalyzerOptions& options) {
  RunFileReader files;
  return analyze_run_files(run, options, files);
}

absl::StatusOr<podscope::v1::HostAnalysis> analyze_host_file(const RunFile& file, RunFileReader& files) {
  if (file.size == 0) return absl::DataLossError(file.location() + " is empty");
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
      std::move(host).finish(header.hostnames, run_directory::file_stem(file.name));
  if (!analysis.ok()) {
    return absl::Status(analysis.status().code(), file.location() + ": " + std::string(analysis.status().message()));
  }
  return analysis;
}

absl::StatusOr<AnalysisOutcome> analyze_run_files(const RunDirectory& run, const PodAnalyzerOptions& options,
                                                  RunFileReader& files) {
  std::vector<std::string> notes;
  absl::StatusOr<std::vector<RunFile>> run_files = run_directory::list_run_files(run, &notes);
  if (!run_files.ok()) return run_files.status();
  return analyze_each(*run_files, notes, run.location(), options, files);
}

}  // namespace podscope::analysis
