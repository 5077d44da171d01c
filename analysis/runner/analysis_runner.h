// The file-touching shell around the pod analysis: reads every *.xplane.pb (and torch.profiler trace) of a run
// directory one plane at a time (clock offsets and host names come from each file's /host:CPU plane), builds each
// file's analysis (its step database and every tool's part of it, analysis/tools/tool.h), merges them into the pod's,
// and writes each tool's files and report.html, a tab per tool, atomically into the same directory. Used by `podscope
// analyze RUN_DIR` and after every capture. See docs/analysis.md.
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

// The profile files of a run directory (*.xplane.pb and torch.profiler's *.pt.trace.json[.gz]), sorted by name:
// the order that fixes the global core numbering of TF/JAX device planes, for every reader of a run. NotFound when
// the directory is missing or holds none.
absl::StatusOr<std::vector<std::filesystem::path>> list_run_files(const std::filesystem::path& run_dir);

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
