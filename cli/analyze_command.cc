#include "cli/analyze_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/runner/analysis_runner.h"
#include "analysis/tools/tool.h"
#include "cli/terminal_text.h"
#include "daemon/heap.h"
#include "trace_writers/pod_trace.h"

namespace podscope::cli {
namespace {

namespace fs = std::filesystem;

// What the command reads and where its outputs go: a run directory (itself), or files given (their outputs into
// --out, else the first file's directory).
struct Inputs {
  std::vector<fs::path> files;  // empty for a directory
  fs::path output_dir;
};

absl::StatusOr<Inputs> inputs_of(const AnalyzeFlags& flags) {
  Inputs inputs;
  std::error_code ec;
  if (flags.inputs.size() == 1 && fs::is_directory(flags.inputs.front(), ec)) {
    if (!flags.out.empty())
      return absl::InvalidArgumentError("--out is for files given: a run directory's outputs go into it");
    inputs.output_dir = flags.inputs.front();
    return inputs;
  }
  for (const std::string& input : flags.inputs) inputs.files.emplace_back(input);
  inputs.output_dir = flags.out.empty() ? inputs.files.front().parent_path() : fs::path(flags.out);
  if (inputs.output_dir.empty()) inputs.output_dir = ".";
  return inputs;
}

int fail(const std::string& message, int exit_code) {
  print(std::cerr, "podscope analyze: " + message + "\n");
  return exit_code;
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
}

int run_analyze_command(const AnalyzeFlags& flags) {
  const absl::StatusOr<Inputs> given = inputs_of(flags);
  if (!given.ok()) return fail(std::string(given.status().message()), 2);
  const Inputs& inputs = *given;
  std::error_code ec;
  if (!fs::is_directory(inputs.output_dir, ec)) return fail(inputs.output_dir.string() + " is not a directory", 2);
  std::vector<fs::path> files;
  if (!inputs.files.empty()) {
    absl::StatusOr<std::vector<fs::path>> checked = analysis::check_run_files(inputs.files);
    if (!checked.ok()) return fail(std::string(checked.status().message()), 2);
    files = std::move(*checked);
  }
  pod_capture::TraceSelection selection;
  if (!flags.trace_window.empty()) {
    auto parsed = pod_capture::parse_trace_selection(flags.trace_window);
    if (!parsed.ok()) return fail("--trace-window: " + std::string(parsed.status().message()), 2);
    selection = *parsed;
  }
  // One reader for both passes over the run: each trace is converted once.
  kineto::RunFileReader reader;
  auto outcome = files.empty() ? analysis::analyze_run_directory(inputs.output_dir, {}, reader)
                               : analysis::analyze_files(files, inputs.output_dir, {}, reader);
  if (!outcome.ok()) return fail(std::string(outcome.status().message()), 1);
  return_free_heap();  // what the analysis freed, before the traces read the run again
  auto traces = files.empty() ? pod_capture::write_run_traces(inputs.output_dir, selection, reader)
                              : pod_capture::write_traces(files, inputs.output_dir, selection, reader);
  if (!traces.ok()) return fail("trace: " + std::string(traces.status().message()), 1);
  std::ostringstream out;
  out << analysis::tool_page(*outcome, flags.tool);
  for (const auto& file : outcome->written_files) out << "wrote " << file.string() << "\n";
  out << "wrote " << traces->json.string() << "\n";
  out << "wrote " << traces->perfetto.string() << " (" << traces->counts.slices << " slices, "
      << traces->counts.counter_values << " counter values, " << traces->counts.flow_starts << " flows)\n";
  print(std::cout, out.str());
  // As `podscope capture`: 3 when only some of the run's files could be used.
  for (const auto& bad : outcome->bad_files) print(std::cerr, "podscope analyze: skipped " + bad + "\n");
  return outcome->bad_files.empty() ? 0 : 3;
}

}  // namespace podscope::cli
