// The file-touching shell around the pod analysis: reads every *.xplane.pb (and torch.profiler or other Chrome trace)
// of a run directory, or the files given, one plane at a time (clock offsets and host names come from each file's
// /host:CPU plane), builds each file's analysis (its step database and every tool's part of it,
// analysis/tools/tool.h), merges them into the pod's, and writes each tool's files and report.html, a tab per tool,
// atomically into the same directory. Used by `podscope analyze RUN_DIR` and after every capture. See
// docs/analysis.md.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/pod/pod_analyzer.h"
#include "analysis/tools/tool.h"
#include "kineto/trace_file.h"

namespace podscope::analysis {

struct AnalysisOptions {
  PodAnalyzerOptions analyzer;
  // Shown at the top of report.html; empty means the run directory's name.
  std::string report_title;
};

// Fails when the directory has no *.xplane.pb or none of them can be read (naming each); writes nothing then.
// Files that cannot be read while others can are named in `bad_files` and in the summary. When an output cannot
// be written (a full disk), ABORTED naming it, and the outputs already written are removed: none stays.
absl::StatusOr<AnalysisOutcome> analyze_run_directory(const std::filesystem::path& run_dir,
                                                      const AnalysisOptions& options = {});
// The same, reading through `files`, which the caller's other passes over the run share (the pod-trace writer's):
// each torch.profiler trace is converted once for all of them.
absl::StatusOr<AnalysisOutcome> analyze_run_directory(const std::filesystem::path& run_dir,
                                                      const AnalysisOptions& options, kineto::RunFileReader& files);

// The analysis of the files given (`podscope analyze a.json.gz b.xplane.pb`) as if they were a run directory's,
// its outputs written into `output_dir`; same failures, and InvalidArgument for a file that is neither an XSpace nor a
// Chrome trace (check_run_files).
absl::StatusOr<AnalysisOutcome> analyze_files(const std::vector<std::filesystem::path>& paths,
                                              const std::filesystem::path& output_dir, const AnalysisOptions& options,
                                              kineto::RunFileReader& files);

// The profile files of a run directory, sorted by name (the order that fixes the global core numbering of TF/JAX
// device planes, for every reader of a run): *.xplane.pb, torch.profiler's *.pt.trace.json[.gz], and any other
// *.json[.gz] whose content is a Chrome trace (kineto::is_chrome_trace_file), as HTA reads a directory; the run's
// own JSON outputs are left out. Each other *.json[.gz] left out is named in `notes`, with why. NotFound when the
// directory is missing or holds none.
absl::StatusOr<std::vector<std::filesystem::path>> list_run_files(const std::filesystem::path& run_dir,
                                                                  std::vector<std::string>* notes = nullptr);

// The files given, sorted as list_run_files sorts them, when each is a regular file that is an XSpace (by its name)
// or a trace (by its name, or its content a Chrome trace); else the error names the first that is not.
absl::StatusOr<std::vector<std::filesystem::path>> check_run_files(std::vector<std::filesystem::path> files);

// One host's file (an XSpace, or a torch.profiler trace converted to one) analysed on its own: its step database and
// every tool's part, which merge_host_analyses (analysis/tools/tool.h) merges with the run's other files' into the
// pod's analysis. DataLoss naming the file when it cannot be read (empty, truncated, lengths that lie).
absl::StatusOr<podscope::v1::HostAnalysis> analyze_host_file(const std::filesystem::path& file,
                                                             kineto::RunFileReader& files);

// The reading and analysing part of analyze_run_directory (same failures), writing nothing: `written_files` stays
// empty.
absl::StatusOr<AnalysisOutcome> analyze_run_files(const std::filesystem::path& run_dir,
                                                  const PodAnalyzerOptions& options = {});
absl::StatusOr<AnalysisOutcome> analyze_run_files(const std::filesystem::path& run_dir,
                                                  const PodAnalyzerOptions& options, kineto::RunFileReader& files);

}  // namespace podscope::analysis
