// The file-touching shell around the pod analysis: reads every *.xplane.pb (and torch.profiler trace) of a run
// directory one plane at a time (clock offsets and host names come from each file's /host:CPU plane), builds each
// file's step database and feeds every tool of the tool table (tools.h), and writes each tool's files and
// report.html, a tab per tool, atomically into the same directory. Used by `podscope analyze RUN_DIR` and after
// every capture. See docs/analysis.md.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/kernel_stats.h"
#include "analysis/memory_profile.h"
#include "analysis/op_stats.h"
#include "analysis/pod_analyzer.h"
#include "kineto/trace_file.h"
#include "podscope/v1/pod_analysis.pb.h"
#include "podscope/v1/step_database.pb.h"
#include "tensorflow/input_pipeline.pb.h"
#include "tensorflow/overview_page.pb.h"
#include "tensorflow/tf_data_stats.pb.h"

namespace podscope::analysis {

struct AnalysisOptions {
  PodAnalyzerOptions analyzer;
  // Shown at the top of report.html; empty means the run directory's name.
  std::string report_title;
};

struct AnalysisOutcome {
  // Each file's host, as the step tools read it: its step database (step_database.h), in file order, the files that
  // could not be read left out.
  std::vector<podscope::v1::HostStepDatabase> step_databases;
  podscope::v1::PodAnalysis analysis;
  // What the CLI prints after a capture.
  std::string summary_text;
  // The step tools.
  tensorflow::profiler::OverviewPage overview_page;
  tensorflow::profiler::InputPipelineAnalysisResult input_pipeline;
  // The overview's recommendation, which the capture command prints after the pod summary.
  std::string recommendation_text;
  tensorflow::profiler::CombinedTfDataStats tf_data_stats;
  // The tf.data tool's terminal page (`podscope analyze RUN --tool tf_data`).
  std::string tf_data_text;
  std::vector<std::filesystem::path> written_files;
  // Files that could not be read (empty, truncated, or with lengths that lie: none of their planes is analysed),
  // each naming the file and what was wrong; the other files were analysed.
  std::vector<std::string> bad_files;
  // The op-level tools, as written to their files (with the warnings they counted).
  KernelStatsResult kernel_stats;
  MemoryProfileResult memory_profile;
  OpStatsResult op_stats;
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

// The reading and analysing part of analyze_run_directory (same failures), writing nothing: `written_files` stays
// empty.
absl::StatusOr<AnalysisOutcome> analyze_run_files(const std::filesystem::path& run_dir,
                                                  const PodAnalyzerOptions& options = {});
absl::StatusOr<AnalysisOutcome> analyze_run_files(const std::filesystem::path& run_dir,
                                                  const PodAnalyzerOptions& options, kineto::RunFileReader& files);

// The tools that read steps (the pod viewer, the overview page, which embeds the input pipeline analyzer's result),
// from `outcome.step_databases`, the pod's hosts in file order, merged: what analyze_run_files does once every file
// is read, and what hosts analysed apart (each file alone, its database written and read back) merge into.
void run_step_tools(const PodAnalyzerOptions& options, AnalysisOutcome& outcome);

}  // namespace podscope::analysis
