#include "cli/analyze_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/runner/analysis_runner.h"
#include "analysis/tools/tool.h"
#include "cli/terminal_text.h"
#include "daemon/heap.h"
#include "run_directory/run_directory.h"
#include "absl/strings/numbers.h"
#include "storage/location.h"
#include "trace_writers/pod_trace.h"

namespace podscope::cli {
namespace {

namespace fs = std::filesystem;

// What the command reads and where its outputs go: a run (itself), or files given (their outputs into --out, else the
// first file's run).
struct Inputs {
  std::vector<run_directory::RunFile> files;  // empty for a run
  std::optional<run_directory::RunDirectory> output;
};

// Whether a lone argument names a run rather than a file: a local directory, or a bucket URL whose name is not a
// profile file's.
bool names_a_run(const std::string& input) {
  if (!storage::is_bucket_url(input)) {
    std::error_code ec;
    return fs::is_directory(input, ec);
  }
  absl::StatusOr<storage::Location> location = storage::parse_location(input);
  const std::string name = location.ok() ? location->name() : "";
  return !run_directory::is_xspace_file_name(name) && !run_directory::is_json_file_name(name);
}

// The run at `location`, which must be there when it is local.
absl::StatusOr<run_directory::RunDirectory> output_run(const std::string& location) {
  absl::StatusOr<run_directory::RunDirectory> run = run_directory::RunDirectory::open(location);
  if (!run.ok()) return run.status();
  std::error_code ec;
  if (!run->in_bucket() && !fs::is_directory(run->local_path(), ec)) {
    return absl::InvalidArgumentError(location + " is not a directory");
  }
  return run;
}

absl::StatusOr<Inputs> inputs_of(const AnalyzeFlags& flags) {
  Inputs inputs;
  if (flags.inputs.size() == 1 && names_a_run(flags.inputs.front())) {
    if (!flags.out.empty())
      return absl::InvalidArgumentError("--out is for files given: a run directory's outputs go into it");
    absl::StatusOr<run_directory::RunDirectory> run = output_run(flags.inputs.front());
    if (!run.ok()) return run.status();
    inputs.output = *std::move(run);
    return inputs;
  }
  absl::StatusOr<std::vector<run_directory::RunFile>> checked = run_directory::check_run_files(flags.inputs);
  if (!checked.ok()) return checked.status();
  inputs.files = *std::move(checked);
  if (flags.out.empty()) {
    // Beside the first file given: in its directory, or its prefix in a bucket.
    absl::StatusOr<storage::Location> first = storage::parse_location(flags.inputs.front());
    if (!first.ok()) return first.status();
    const fs::path dir = first->path.parent_path();
    const std::string beside = first->in_bucket() ? first->parent().url() : dir.empty() ? "." : dir.string();
    absl::StatusOr<run_directory::RunDirectory> run = output_run(beside);
    if (!run.ok()) return run.status();
    inputs.output = *std::move(run);
    return inputs;
  }
  absl::StatusOr<run_directory::RunDirectory> out = output_run(flags.out);
  if (!out.ok()) return out.status();
  inputs.output = *std::move(out);
  return inputs;
}

int fail(const std::string& message, int exit_code) {
  print(std::cerr, "podscope analyze: " + message + "\n");
  return exit_code;
}

// --hosts I/N: shard I (0 to N - 1) of N.
absl::StatusOr<analysis::HostShard> parse_host_shard(const std::string& text) {
  const size_t slash = text.find('/');
  analysis::HostShard shard;
  if (slash == std::string::npos || !absl::SimpleAtoi(text.substr(0, slash), &shard.index) ||
      !absl::SimpleAtoi(text.substr(slash + 1), &shard.count)) {
    return absl::InvalidArgumentError("--hosts " + text + ": expected I/N, shard I of N (e.g. 0/4)");
  }
  if (shard.count < 1) return absl::InvalidArgumentError("--hosts " + text + ": N must be at least 1");
  if (shard.index < 0 || shard.index >= shard.count) {
    return absl::InvalidArgumentError("--hosts " + text + ": I must be from 0 to N - 1 (" +
                                      std::to_string(shard.count - 1) + ")");
  }
  return shard;
}

// `--hosts I/N`: the shard's per-host databases, no pod output.
int run_shard(const run_directory::RunDirectory& run, analysis::HostShard shard,
              const analysis::AnalysisOptions& options) {
  run_directory::RunFileReader reader;
  absl::StatusOr<analysis::ShardOutcome> outcome = analysis::analyze_run_shard(run, shard, options, reader);
  if (!outcome.ok()) return fail(std::string(outcome.status().message()), 1);
  std::ostringstream out;
  for (const auto& file : outcome->written) out << "wrote " << file << "\n";
  for (const auto& file : outcome->reused) out << "kept " << file << " (it matches its host file)\n";
  out << "shard " << shard.index << "/" << shard.count << ": " << outcome->written.size() + outcome->reused.size()
      << " host databases; `podscope analyze " << run.location() << "` merges every shard's\n";
  print(std::cout, out.str());
  for (const auto& note : outcome->notes) print(std::cerr, "podscope analyze: note: " + note + "\n");
  for (const auto& bad : outcome->bad_files) print(std::cerr, "podscope analyze: skipped " + bad + "\n");
  return outcome->bad_files.empty() ? 0 : 3;
}

// The pod's traces of the run or files given, and what was written. A whole run past --trace-max-hosts gets none:
// writing them reads every host file, which a merge of per-host databases otherwise never does, and a trace viewer
// shows a few hosts well, not a thousand; the files of the hosts wanted, given by name, are traced whatever their
// number.
absl::StatusOr<std::string> write_pod_traces(const AnalyzeFlags& flags, const Inputs& inputs,
                                             const trace_writers::TraceSelection& selection, size_t hosts,
                                             run_directory::RunFileReader& reader) {
  const run_directory::RunDirectory& output = *inputs.output;
  std::ostringstream out;
  if (inputs.files.empty() && flags.trace_window.empty() && hosts > static_cast<size_t>(flags.trace_max_hosts)) {
    out << "no pod trace written: " << hosts << " hosts, past --trace-max-hosts " << flags.trace_max_hosts
        << "; trace the hosts you want by naming their files (`podscope analyze " << output.location_of("<host file>")
        << " ... --out DIR`), or one step of all (--trace-window step:N)\n";
    return out.str();
  }
  auto traces = inputs.files.empty() ? trace_writers::write_run_traces(output, selection, reader)
                                     : trace_writers::write_traces(inputs.files, output, selection, reader);
  if (!traces.ok()) return traces.status();
  out << "wrote " << traces->json << "\n";
  out << "wrote " << traces->perfetto << " (" << traces->counts.slices << " slices, " << traces->counts.counter_values
      << " counter values, " << traces->counts.flow_starts << " flows)\n";
  return out.str();
}

}  // namespace

void add_analyze_flags(CLI::App& command, AnalyzeFlags& flags) {
  command
      .add_option("inputs", flags.inputs,
                  "A run directory (<logdir>/plugins/profile/<run>, or a directory of torch.profiler traces), or "
                  "profile files: *.xplane.pb and Chrome traces (*.json[.gz] with traceEvents)")
      ->required();
  command.add_option("--out", flags.out,
                     "Where the outputs go when files are given (default: the first file's directory)");
  command.add_option("--trace-window", flags.trace_window,
                     "Write small traces of a window instead of the whole run's: A:B (ms from the capture's "
                     "start) or step:N");
  std::vector<std::string> names;
  std::string listed;
  for (const analysis::Tool& tool : analysis::analysis_tools()) {
    names.emplace_back(tool.name);
    listed.append(listed.empty() ? "" : ", ").append(tool.name);
    if (!tool.description.empty()) listed.append(" (").append(tool.description).append(")");
  }
  command
      .add_option("--tool", flags.tool,
                  "Print this tool's page: " + listed + " (default: the overview, then the pod summary)")
      ->check(CLI::IsMember(names));
  flags.jobs = analysis::default_analysis_jobs();
  command
      .add_option("--jobs", flags.jobs,
                  "How many host files are analysed at once, each streamed by its own thread (default: the "
                  "machine's cores)")
      ->check(CLI::Range(1, 4096));
  flags.trace_max_hosts = trace_writers::kDefaultTraceMaxHosts;
  command
      .add_option("--trace-max-hosts", flags.trace_max_hosts,
                  "A run of more hosts than this gets no whole pod trace (writing it reads every host file; name the "
                  "hosts' files to trace them, or give --trace-window)")
      ->check(CLI::Range(0, 1 << 20));
  command.add_option("--hosts", flags.hosts,
                     "I/N: analyse only shard I (0 to N-1) of N of a run's host files (every N-th in name order from "
                     "the I-th) into their per-host databases (<host file>.host_analysis.pb) and write no pod "
                     "output; the same command without --hosts then merges them. A run's hosts are otherwise each "
                     "merged from their database when it matches its file, else analysed and their database written");
}

int run_analyze_command(const AnalyzeFlags& flags) {
  const absl::StatusOr<Inputs> given = inputs_of(flags);
  if (!given.ok()) return fail(std::string(given.status().message()), 2);
  const Inputs& inputs = *given;
  const run_directory::RunDirectory& output = *inputs.output;
  analysis::AnalysisOptions options;
  options.jobs = flags.jobs;
  if (!flags.hosts.empty()) {
    if (!inputs.files.empty()) return fail("--hosts shards a run directory's hosts, not files given", 2);
    if (!flags.trace_window.empty() || !flags.tool.empty()) {
      return fail("--hosts writes only the shard's host databases: no --trace-window or --tool", 2);
    }
    absl::StatusOr<analysis::HostShard> shard = parse_host_shard(flags.hosts);
    if (!shard.ok()) return fail(std::string(shard.status().message()), 2);
    return run_shard(output, *shard, options);
  }
  trace_writers::TraceSelection selection;
  if (!flags.trace_window.empty()) {
    auto parsed = trace_writers::parse_trace_selection(flags.trace_window);
    if (!parsed.ok()) return fail("--trace-window: " + std::string(parsed.status().message()), 2);
    selection = *parsed;
  }
  // One reader for both passes over the run: each trace is converted once.
  run_directory::RunFileReader reader;
  auto outcome = inputs.files.empty() ? analysis::analyze_run_directory(output, options, reader)
                                      : analysis::analyze_files(inputs.files, output, options, reader);
  if (!outcome.ok()) return fail(std::string(outcome.status().message()), 1);
  return_free_heap();  // what the analysis freed, before the traces read the run again
  std::ostringstream out;
  out << analysis::tool_page(*outcome, flags.tool);
  for (const auto& file : outcome->written_files) out << "wrote " << file << "\n";
  if (inputs.files.empty()) {
    out << outcome->hosts_from_databases << " of " << outcome->step_databases.size()
        << " hosts merged from their host databases, the others analysed\n";
  }
  absl::StatusOr<std::string> traces =
      write_pod_traces(flags, inputs, selection, outcome->step_databases.size(), reader);
  if (!traces.ok()) return fail("trace: " + std::string(traces.status().message()), 1);
  out << *traces;
  print(std::cout, out.str());
  // As `podscope capture`: 3 when only some of the run's files could be used.
  for (const auto& note : outcome->database_notes) print(std::cerr, "podscope analyze: note: " + note + "\n");
  for (const auto& bad : outcome->bad_files) print(std::cerr, "podscope analyze: skipped " + bad + "\n");
  return outcome->bad_files.empty() ? 0 : 3;
}

}  // namespace podscope::cli
