#include "analysis/runner/analysis_runner.h"

#include <algorithm>
#include <memory>

#include "analysis/rendering/renderers.h"
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

}  // namespace

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
  absl::StatusOr<std::vector<std::filesystem::path>> paths = list_run_files(run_dir);
  if (!paths.ok()) return paths.status();
  std::vector<podscope::v1::HostAnalysis> hosts;
  std::vector<std::string> bad_files;
  for (const std::filesystem::path& path : *paths) {
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
    return absl::DataLossError("no file of " + run_dir.string() + " could be read:" + all);
  }
  AnalysisOutcome outcome = merge_host_analyses(std::move(hosts), options);
  for (const auto& bad : bad_files) outcome.summary_text += "warning: file skipped: " + bad + "\n";
  outcome.bad_files = std::move(bad_files);
  return outcome;
}

}  // namespace podscope::analysis
