#include "analysis/runner/analysis_runner.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <thread>

#include "analysis/rendering/renderers.h"
#include "analysis/runner/host_analysis_build.h"
#include "daemon/atomic_file.h"
#include "proto/xspace/serialize.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace podscope::analysis {
namespace {

using run_directory::RunDirectory;
using run_directory::RunFile;
using run_directory::RunFileReader;

// Calls `each` with 0 .. count - 1, at most `at_once` calls at a time: each thread (this one among them) takes the
// next number not taken.
void for_each_at_once(size_t count, size_t at_once, const std::function<void(size_t)>& each) {
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) each(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(at_once, count); ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
}

// Every tool's files, then report.html with a tab per tool.
absl::StatusOr<std::vector<ToolFile>> rendered_outputs(const RunDirectory& output, const AnalysisOptions& options,
                                                       const AnalysisOutcome& outcome) {
  std::vector<ToolFile> files;
  for (const auto& result : outcome.results) {
    for (ToolFile& file : result->files(outcome)) {
      if (!file.content.ok()) return file.content.status();
      files.push_back(std::move(file));
    }
  }
  const std::string title =
      options.report_title.empty() ? "podscope pod analysis: " + output.name() : options.report_title;
  absl::StatusOr<std::vector<ReportTab>> tabs = report_tabs(outcome);
  if (!tabs.ok()) return tabs.status();
  files.push_back({"report.html", render_report_html(*tabs, title)});
  return files;
}

// How many outputs are written at once: a bucket takes each as a request of its own, whose round trip, not the
// bytes, is most of its time.
constexpr size_t kOutputsWrittenAtOnce = 8;

// Writes the outcome's files into `output`, all or none: each atomically (a temporary file renamed, or one bucket
// object committed), unsynced, as they are made again from the run's files and syncing each cost more than the
// analysis of a small run.
absl::StatusOr<AnalysisOutcome> write_all(absl::StatusOr<AnalysisOutcome> outcome, const RunDirectory& output,
                                          const AnalysisOptions& options) {
  if (!outcome.ok()) return outcome.status();
  absl::StatusOr<std::vector<ToolFile>> files = rendered_outputs(output, options, *outcome);
  if (!files.ok()) return files.status();
  std::vector<absl::Status> written(files->size());
  for_each_at_once(files->size(), kOutputsWrittenAtOnce, [&](size_t i) {
    written[i] = output.write((*files)[i].name, *(*files)[i].content, Durability::kRebuildable);
  });
  absl::Status first_failure;
  for (size_t i = 0; i < files->size(); ++i) {
    if (!written[i].ok() && first_failure.ok()) first_failure = written[i];
  }
  if (first_failure.ok()) {
    for (const ToolFile& file : *files) outcome->written_files.push_back(output.location_of(file.name));
    return outcome;
  }
  // Some outputs beside others missing would pass for a whole analysis: none stays (a full disk is the usual
  // cause, and `podscope analyze` writes them all again once there is room).
  for (size_t i = 0; i < files->size(); ++i) {
    if (written[i].ok()) output.remove((*files)[i].name).IgnoreError();
  }
  return absl::AbortedError("the analysis outputs could not be written, none was kept: " +
                            std::string(first_failure.message()));
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

// A per-host database is a host's analysis: far smaller than its file, and refused past this.
constexpr uint64_t kMaxDatabaseBytes = uint64_t{1} << 30;

// Where per-host databases are read and written: in a run, not for files given on their own.
struct Databases {
  bool used = false;
  std::set<std::string> present;  // the run's database files, by name
};

absl::StatusOr<Databases> databases_of(const RunDirectory& run) {
  Databases databases;
  databases.used = true;
  absl::StatusOr<std::vector<storage::ObjectInfo>> listed = run.files();
  if (!listed.ok()) return listed.status();
  for (const storage::ObjectInfo& object : *listed) {
    if (object.name.ends_with(kHostAnalysisSuffix)) databases.present.insert(object.name);
  }
  return databases;
}

// One host file's analysis, from its database or from the file.
struct HostResult {
  absl::StatusOr<podscope::v1::HostAnalysis> analysis = absl::UnknownError("not analysed");
  bool from_database = false;
  std::string note;     // why the database beside the file was not used
  std::string written;  // where its database was written
};

// What ties a database to a run file: the file as its store listed it.
storage::ObjectInfo object_info(const RunFile& file) { return {file.name, file.size, file.version}; }

// The analysis in `file`'s database when that was made from this very file (its name, size and version) by this
// build's analysis; else why not.
absl::StatusOr<podscope::v1::HostAnalysis> matching_database(const RunFile& file) {
  absl::StatusOr<std::string> bytes = file.run.read(host_analysis_file_name(file.name), kMaxDatabaseBytes);
  if (!bytes.ok()) return bytes.status();
  podscope::v1::HostAnalysisFile database;
  if (!database.ParseFromString(*bytes)) return absl::DataLossError("it does not parse as a HostAnalysisFile");
  if (database.analysis_build() != host_analysis_build()) {
    return absl::FailedPreconditionError("it was made by another build's analysis (" +
                                         database.analysis_build().substr(0, 12) + ", this podscope's is " +
                                         std::string(host_analysis_build().substr(0, 12)) + ")");
  }
  if (database.host_file() != file.name) {
    return absl::FailedPreconditionError("it was made from " + database.host_file());
  }
  if (database.host_file_size() != file.size || database.host_file_version() != file.version) {
    return absl::FailedPreconditionError("the host file changed since it was analysed (" +
                                         std::to_string(database.host_file_size()) + " bytes then, " +
                                         std::to_string(file.size) + " now, or written again)");
  }
  return std::move(*database.mutable_analysis());
}

// Writes `analysis` as `file`'s database; the database's location, or why it could not be written.
absl::StatusOr<std::string> write_database(const RunFile& file, const podscope::v1::HostAnalysis& analysis) {
  absl::StatusOr<std::string> bytes = host_database(object_info(file), analysis);
  if (!bytes.ok()) return bytes.status();
  const std::string name = host_analysis_file_name(file.name);
  if (absl::Status s = file.run.write(name, *bytes, Durability::kRebuildable); !s.ok()) return s;
  return file.run.location_of(name);
}

HostResult host_result(const RunFile& file, const Databases& databases, RunFileReader& files) {
  HostResult result;
  // A store that tells no version (none known today) cannot tie a database to its file: none is used or written.
  const bool tied = databases.used && !file.version.empty();
  const std::string database = host_analysis_file_name(file.name);
  if (tied && databases.present.contains(database)) {
    absl::StatusOr<podscope::v1::HostAnalysis> matching = matching_database(file);
    if (matching.ok()) {
      // An agent that wrote its file into a bucket never knew its clock's offset, which capture.json records (and
      // the file's reader stamps on its planes): taken from there as for its file read.
      if (!matching->steps().has_clock_offset_ns()) {
        if (const std::optional<int64_t> offset = files.recorded_clock_offset_ns(file)) {
          matching->mutable_steps()->set_clock_offset_ns(*offset);
        }
      }
      result.analysis = *std::move(matching);
      result.from_database = true;
      return result;
    }
    result.note = file.run.location_of(database) + " not used (" + std::string(matching.status().message()) +
                  "): " + file.name + " analysed again";
  }
  result.analysis = analyze_host_file(file, files);
  if (!result.analysis.ok() || !tied) return result;
  absl::StatusOr<std::string> written = write_database(file, *result.analysis);
  if (written.ok()) {
    result.written = *std::move(written);
  } else {
    result.note += (result.note.empty() ? "" : "; ") + file.name +
                   "'s database could not be written: " + std::string(written.status().message());
  }
  return result;
}

// Each file's result, `jobs` files at a time: each thread takes the next file not taken, so at most `jobs` files are
// being read at once, each streamed plane by plane.
std::vector<HostResult> host_results(const std::vector<RunFile>& run_files, const Databases& databases, int jobs,
                                     RunFileReader& files) {
  std::vector<HostResult> results(run_files.size());
  for_each_at_once(run_files.size(), static_cast<size_t>(std::max(jobs, 1)),
                   [&](size_t i) { results[i] = host_result(run_files[i], databases, files); });
  return results;
}

// Reads and analyses `run_files` (`what` names them in errors), merging the databases of `databases` that match;
// `notes` say what was left out.
absl::StatusOr<AnalysisOutcome> analyze_each(const std::vector<RunFile>& run_files, const Databases& databases,
                                             const std::vector<std::string>& notes, std::string_view what,
                                             const AnalysisOptions& options, RunFileReader& files) {
  std::vector<podscope::v1::HostAnalysis> hosts;
  std::vector<std::string> bad_files;
  size_t from_databases = 0;
  std::vector<std::string> database_notes;
  for (HostResult& result : host_results(run_files, databases, options.jobs, files)) {
    if (!result.note.empty()) database_notes.push_back(std::move(result.note));
    if (result.analysis.ok()) {
      hosts.push_back(*std::move(result.analysis));
      from_databases += result.from_database ? 1 : 0;
    } else {
      bad_files.emplace_back(result.analysis.status().message());
    }
  }
  absl::StatusOr<AnalysisOutcome> outcome =
      merge_hosts(std::move(hosts), std::move(bad_files), notes, what, options.analyzer);
  if (outcome.ok()) {
    outcome->hosts_from_databases = from_databases;
    outcome->database_notes = std::move(database_notes);
  }
  return outcome;
}

// The run's profile files, merging the databases that match them when `use_databases` (and writing those of the
// hosts analysed).
absl::StatusOr<AnalysisOutcome> analyze_run(const RunDirectory& run, const AnalysisOptions& options, bool use_databases,
                                            RunFileReader& files) {
  std::vector<std::string> notes;
  absl::StatusOr<std::vector<RunFile>> run_files = run_directory::list_run_files(run, &notes);
  if (!run_files.ok()) return run_files.status();
  Databases databases;
  if (use_databases) {
    absl::StatusOr<Databases> listed = databases_of(run);
    if (!listed.ok()) return listed.status();
    databases = *std::move(listed);
  }
  return analyze_each(*run_files, databases, notes, run.location(), options, files);
}

}  // namespace

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const RunDirectory& run, const AnalysisOptions& options) {
  RunFileReader files;
  return analyze_run_directory(run, options, files);
}

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const RunDirectory& run, const AnalysisOptions& options,
                                                      RunFileReader& files) {
  return write_all(analyze_run(run, options, /*use_databases=*/true, files), run, options);
}

std::string host_analysis_file_name(std::string_view host_file_name) {
  return std::string(host_file_name) + std::string(kHostAnalysisSuffix);
}

std::string_view host_analysis_build() { return kHostAnalysisBuild; }

int default_analysis_jobs() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

absl::StatusOr<std::string> host_database(const storage::ObjectInfo& host_file,
                                          const podscope::v1::HostAnalysis& analysis) {
  podscope::v1::HostAnalysisFile database;
  database.set_analysis_build(std::string(host_analysis_build()));
  database.set_host_file(host_file.name);
  database.set_host_file_size(host_file.size);
  database.set_host_file_version(host_file.version);
  *database.mutable_analysis() = analysis;
  return xspace::serialize_deterministically(database);
}

absl::StatusOr<ShardOutcome> analyze_run_shard(const RunDirectory& run, HostShard shard, const AnalysisOptions& options,
                                               RunFileReader& files) {
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count) {
    return absl::InvalidArgumentError("shard " + std::to_string(shard.index) + " of " + std::to_string(shard.count) +
                                      ": shards are numbered 0 to count - 1, count at least 1");
  }
  ShardOutcome outcome;
  absl::StatusOr<std::vector<RunFile>> run_files = run_directory::list_run_files(run, &outcome.notes);
  if (!run_files.ok()) return run_files.status();
  absl::StatusOr<Databases> databases = databases_of(run);
  if (!databases.ok()) return databases.status();
  std::vector<RunFile> mine;
  for (size_t i = static_cast<size_t>(shard.index); i < run_files->size(); i += static_cast<size_t>(shard.count)) {
    mine.push_back((*run_files)[i]);
  }
  std::vector<HostResult> results = host_results(mine, *databases, options.jobs, files);
  for (size_t i = 0; i < mine.size(); ++i) {
    HostResult& result = results[i];
    if (!result.note.empty()) outcome.notes.push_back(std::move(result.note));
    if (!result.analysis.ok()) {
      outcome.bad_files.emplace_back(result.analysis.status().message());
    } else if (result.from_database) {
      outcome.reused.push_back(run.location_of(host_analysis_file_name(mine[i].name)));
    } else if (!result.written.empty()) {
      outcome.written.push_back(std::move(result.written));
    }
  }
  return outcome;
}

absl::StatusOr<AnalysisOutcome> analyze_files(const std::vector<RunFile>& given, const RunDirectory& output,
                                              const AnalysisOptions& options, RunFileReader& files) {
  return write_all(analyze_each(given, {}, {}, "the files given", options, files), output, options);
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
  AnalysisOptions analysis;
  analysis.analyzer = options;
  return analyze_run(run, analysis, /*use_databases=*/false, files);
}

}  // namespace podscope::analysis
