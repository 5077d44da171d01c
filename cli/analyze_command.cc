#include "cli/analyze_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "analysis/runner/analysis_runner.h"
#include "analysis/runner/tools.h"
#include "daemon/heap.h"
#include "trace_writers/pod_trace.h"

namespace podscope::cli {
namespace {

// The page of the tool asked for; without one, the default page.
std::string tool_page(const std::string& name, const analysis::AnalysisOutcome& outcome) {
  const analysis::Tool* tool = analysis::find_tool(name);
  return tool != nullptr ? tool->page(outcome) : analysis::default_page(outcome);
}

}  // namespace

void add_analyze_flags(CLI::App& command, AnalyzeFlags& flags) {
  command.add_option("run_dir", flags.run_dir, "Run directory (<logdir>/plugins/profile/<run>)")->required();
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
  absl::StatusOr<run_directory::RunDirectory> run = run_directory::RunDirectory::open(flags.run_dir);
  if (!run.ok()) {
    std::cerr << "podscope analyze: " << run.status().message() << "\n";
    return 2;
  }
  if (!run->in_bucket() && !std::filesystem::is_directory(flags.run_dir)) {
    std::cerr << "podscope analyze: " << flags.run_dir << " is not a directory\n";
    return 2;
  }
  pod_capture::TraceSelection selection;
  if (!flags.trace_window.empty()) {
    auto parsed = pod_capture::parse_trace_selection(flags.trace_window);
    if (!parsed.ok()) {
      std::cerr << "podscope analyze: --trace-window: " << parsed.status().message() << "\n";
      return 2;
    }
    selection = *parsed;
  }
  // One reader for both passes over the run: each torch.profiler trace is converted once.
  run_directory::RunFileReader files;
  auto outcome = analysis::analyze_run_directory(*run, {}, files);
  if (!outcome.ok()) {
    std::cerr << "podscope analyze: " << outcome.status().message() << "\n";
    return 1;
  }
  return_free_heap();  // what the analysis freed, before the traces read the run again
  auto traces = pod_capture::write_run_traces(*run, selection, files);
  if (!traces.ok()) {
    std::cerr << "podscope analyze: trace: " << traces.status().message() << "\n";
    return 1;
  }
  std::cout << tool_page(flags.tool, *outcome);
  for (const auto& file : outcome->written_files) std::cout << "wrote " << file << "\n";
  std::cout << "wrote " << traces->json << "\n";
  std::cout << "wrote " << traces->perfetto << " (" << traces->counts.slices << " slices, "
            << traces->counts.counter_values << " counter values, " << traces->counts.flow_starts << " flows)\n";
  // As `podscope capture`: 3 when only some of the run's files could be used.
  for (const auto& bad : outcome->bad_files) std::cerr << "podscope analyze: skipped " << bad << "\n";
  return outcome->bad_files.empty() ? 0 : 3;
}

}  // namespace podscope::cli
