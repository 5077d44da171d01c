// The file-touching shell around the pod analysis: reads every *.xplane.pb (and torch.profiler trace) of a run
// directory (run_directory/) one plane at a time (clock offsets and host names come from each file's /host:CPU plane),
// feeds the pod analyzer, the step model and every tool of the tool table (tools.h), and writes each tool's files and
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
#include "podscope/v1/pod_analysis.pb.h"
#include "run_directory/run_file_reader.h"
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
  std::vector<std::string> written_files;  // where each is (run_directory::RunDirectory::location_of)
  // Files that could not be read (empty, truncated, or with lengths that lie: none of their planes is analysed),
  // each naming the file and what was wrong; the other files were analysed.
  std::vector<std::string> bad_files;
  // The op-level tools, as written to their files (with the warnings they counted).
  KernelStatsResult kernel_stats;
  MemoryProfileResult memory_profile;
  OpStatsResult op_stats;
};

// Fails when the run has no profile file or none of them can be read (naming each); writes nothing then.
// Files that cannot be read while others can are named in `bad_files` and in the summary. When an output cannot
// be written (a full disk), ABORTED naming it, and the outputs already written are removed: none stays.
absl::StatusOr<AnalysisOutcome> analyze_run_directory(const run_directory::RunDirectory& run,
                                                      const AnalysisOptions& options = {});
// The same, reading through `files`, which the caller's other passes over the run share (the pod-trace writer's):
// each torch.profiler trace is converted once for all of them.
absl::StatusOr<AnalysisOutcome> analyze_run_directory(const run_directory::RunDirectory& run,
                                                      const AnalysisOptions& options,
                                                      run_directory::RunFileReader& files);

// The reading and analysing part of analyze_run_directory (same failures), writing nothing: `written_files` stays
// empty.
absl::StatusOr<AnalysisOutcome> analyze_run_files(const run_directory::RunDirectory& run,
                                                  const PodAnalyzerOptions& options = {});
absl::StatusOr<AnalysisOutcome> analyze_run_files(const run_directory::RunDirectory& run,
                                                  const PodAnalyzerOptions& options,
                                                  run_directory::RunFileReader& files);

}  // namespace podscope::analysis
