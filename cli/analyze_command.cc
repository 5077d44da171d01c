#include "cli/analyze_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "analysis/input_pipeline.h"
#include "analysis/overview_page.h"
#include "analysis/runner/analysis_runner.h"
#include "analysis/tool_pages.h"
#include "trace_writers/pod_trace.h"

namespace podscope::cli {
namespace {

constexpr std::string_view kOverviewTool = "overview";
constexpr std::string_view kInputPipelineTool = "input_pipeline";
constexpr std::string_view kTfDataTool = "tf_data";
constexpr std::string_view kKernelStatsTool = "kernel_stats";
constexpr std::string_view kMemoryTool = "memory";
constexpr std::string_view kOpStatsTool = "op_stats";
constexpr std::string_view kPodTool = "pod";

// The terminal page of the tool asked for.
std::string tool_page(const std::string& tool, const analysis::AnalysisOutcome& outcome) {
  if (tool == kOverviewTool) return analysis::render_overview_text(outcome.overview_page);
  if (tool == kInputPipelineTool) return analysis::render_input_pipeline_text(outcome.input_pipeline);
  if (tool == kTfDataTool) return outcome.tf_data_text;
  if (tool == kKernelStatsTool) return analysis::render_kernel_stats_page(outcome.kernel_stats);
  if (tool == kMemoryTool) return analysis::render_memory_profile_page(outcome.memory_profile);
  if (tool == kOpStatsTool) return analysis::render_op_stats_page(outcome.op_stats);
  if (tool == kPodTool) return outcome.summary_text;
  return analysis::render_overview_text(outcome.overview_page) + "\n" + outcome.summary_text;
}

}  // namespace

void add_analyze_flags(CLI::App& command, AnalyzeFlags& flags) {
  command.add_option("run_dir", flags.run_dir, "Run directory (<logdir>/plugins/profile/<run>)")->required();
  command.add_option("--trace-window", flags.trace_window,
                     "Write small traces of a window instead of the whole run's: A:B (ms from the capture's "
                     "start) or step:N");
  command
      .add_option("--tool", flags.tool,
                  "Print this tool's page: overview, input_pipeline, tf_data (tf.data bottlenecks), kernel_stats, "
                  "memory, op_stats (framework ops) or pod (default: the overview, then the pod summary)")
      ->check(CLI::IsMember({std::string(kOverviewTool), std::string(kInputPipelineTool), std::string(kTfDataTool),
                             std::string(kKernelStatsTool), std::string(kMemoryTool), std::string(kOpStatsTool),
                             std::string(kPodTool)}));
}

int run_analyze_command(const AnalyzeFlags& flags) {
  if (!std::filesystem::is_directory(flags.run_dir)) {
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
  auto outcome = analysis::analyze_run_directory(flags.run_dir);
  if (!outcome.ok()) {
    std::cerr << "podscope analyze: " << outcome.status().message() << "\n";
    return 1;
  }
  auto traces = pod_capture::write_run_traces(flags.run_dir, selection);
  if (!traces.ok()) {
    std::cerr << "podscope analyze: trace: " << traces.status().message() << "\n";
    return 1;
  }
  std::cout << tool_page(flags.tool, *outcome);
  for (const auto& file : outcome->written_files) std::cout << "wrote " << file.string() << "\n";
  std::cout << "wrote " << traces->json.string() << "\n";
  std::cout << "wrote " << traces->perfetto.string() << " (" << traces->counts.slices << " slices, "
            << traces->counts.counter_values << " counter values, " << traces->counts.flow_starts << " flows)\n";
  // As `podscope capture`: 3 when only some of the run's files could be used.
  for (const auto& bad : outcome->bad_files) std::cerr << "podscope analyze: skipped " << bad << "\n";
  return outcome->bad_files.empty() ? 0 : 3;
}

}  // namespace podscope::cli
