// The file-touching shell around the pod analysis: reads every *.xplane.pb (and torch.profiler or other Chrome trace)
// of a run directory, or the files given, through run_directory/ (a local directory or a bucket) one plane at a time
// (clock offsets and host names come from each file's /host:CPU plane), builds each file's analysis (its step database
// and every tool's part of it, analysis/tools/tool.h) several files at once, or takes it from the per-host database
// beside the file, merges them into the pod's, and writes each tool's files and report.html, a tab per tool,
// atomically into the same directory. Used by `podscope analyze RUN_DIR` and after every capture. See
// docs/analysis.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/pod/pod_analyzer.h"
#include "analysis/tools/tool.h"
#include "run_directory/run_file_reader.h"

namespace podscope::analysis {

struct AnalysisOptions {
  PodAnalyzerOptions analyzer;
  // Shown at the top of report.html; empty means the run directory's name.
  std::string report_title;
  // How many of the run's host files are analysed at once: each streamed plane by plane by its own thread.
  int jobs = 1;
};

// How many host files `podscope analyze` and the analysis after a capture take at once unless told: the machine's
// cores.
int default_analysis_jobs();

// Per-host databases: each host file's analysis kept beside it as `<host file>.host_analysis.pb` (a
// podscope.v1.HostAnalysisFile), written by whoever analysed the file, merged instead of the file analysed again while
// it matches the file beside it (name, size and version, storage::ObjectInfo) and this build's analysis: a database
// made by other analysis code is analysed again, never merged.
inline constexpr std::string_view kHostAnalysisSuffix = ".host_analysis.pb";
std::string host_analysis_file_name(std::string_view host_file_name);
// What made a host's analysis: a SHA-256 over the sources that turn a file into one (the step database, the pod and
// tool analyses, the protos, the readers of XSpaces and traces), computed when podscope is built, so no change of
// them can be merged with databases made before it.
std::string_view host_analysis_build();
// The bytes of a host file's database: its analysis, tied to the file (its name, size and version) and this build.
absl::StatusOr<std::string> host_database(const storage::ObjectInfo& host_file,
                                          const podscope::v1::HostAnalysis& analysis);

// One shard of a run's hosts: the host files at positions index, index + count, index + 2 × count ... of the run's
// files in name order (run_directory::list_run_files), so shards 0..count-1 hold every file once.
struct HostShard {
  int index = 0;
  int count = 1;
};

// What analysing one shard did: the per-host databases written, the hosts whose database was there and matched,
// the files that could not be read, and why databases beside their files were not used.
struct ShardOutcome {
  std::vector<std::string> written;
  std::vector<std::string> reused;
  std::vector<std::string> bad_files;
  std::vector<std::string> notes;
};

// Fails when the run has no profile file (run_directory::list_run_files) or none of them can be read (naming each);
// writes nothing then. Each host is merged from its per-host database when that matches its file, else analysed and
// its database written beside it (a database that cannot be written is noted, the analysis goes on). Files that cannot
// be read while others can are named in `bad_files` and in the summary. When an output cannot be written (a full disk),
// ABORTED naming it, and the outputs already written are removed: none stays.
absl::StatusOr<AnalysisOutcome> analyze_run_directory(const run_directory::RunDirectory& run,
                                                      const AnalysisOptions& options = {});
// The same, reading through `files`, which the caller's other passes over the run share (the pod-trace writer's):
// each torch.profiler trace is converted once for all of them.
absl::StatusOr<AnalysisOutcome> analyze_run_directory(const run_directory::RunDirectory& run,
                                                      const AnalysisOptions& options,
                                                      run_directory::RunFileReader& files);

// Analyses shard `shard` of the run's hosts (options.jobs at once) and writes their per-host databases, writing no
// pod output: the run's analysis is then the merge of every shard's databases (analyze_run_directory). Fails as
// analyze_run_directory when the run has no profile file, and InvalidArgument when the shard is not one of count.
absl::StatusOr<ShardOutcome> analyze_run_shard(const run_directory::RunDirectory& run, HostShard shard,
                                               const AnalysisOptions& options, run_directory::RunFileReader& files);

// The analysis of the files given (`podscope analyze a.json.gz b.xplane.pb`, run_directory::check_run_files' list) as
// if they were a run's, its outputs written into `output`; same failures.
absl::StatusOr<AnalysisOutcome> analyze_files(const std::vector<run_directory::RunFile>& given,
                                              const run_directory::RunDirectory& output, const AnalysisOptions& options,
                                              run_directory::RunFileReader& files);

// The analysis of a run whose hosts' files were analysed where they were made (each agent that wrote its file into a
// bucket analysed its capture: analyze_host_file's result, in file order), merged and written into `run` as
// analyze_run_directory writes it; `bad_files` name files that could not be analysed. Same failures.
absl::StatusOr<AnalysisOutcome> write_analysis_of_hosts(std::vector<podscope::v1::HostAnalysis> hosts,
                                                        std::vector<std::string> bad_files,
                                                        const run_directory::RunDirectory& run,
                                                        const AnalysisOptions& options);

// One host's file (an XSpace, or a torch.profiler trace converted to one) analysed on its own: its step database and
// every tool's part, which merge_host_analyses (analysis/tools/tool.h) merges with the run's other files' into the
// pod's analysis. DataLoss naming the file when it cannot be read (empty, truncated, lengths that lie).
absl::StatusOr<podscope::v1::HostAnalysis> analyze_host_file(const run_directory::RunFile& file,
                                                             run_directory::RunFileReader& files);

// The reading and analysing part of analyze_run_directory (same failures), writing nothing: `written_files` stays
// empty.
absl::StatusOr<AnalysisOutcome> analyze_run_files(const run_directory::RunDirectory& run,
                                                  const PodAnalyzerOptions& options = {});
absl::StatusOr<AnalysisOutcome> analyze_run_files(const run_directory::RunDirectory& run,
                                                  const PodAnalyzerOptions& options,
                                                  run_directory::RunFileReader& files);

}  // namespace podscope::analysis
