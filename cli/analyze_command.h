// `podscope analyze RUN_DIR [--trace-window A:B|step:N] [--tool NAME]`: the pod analysis and the tools of a captured
// run directory (the tool table, analysis/tools/tool.h) and its merged traces (pod.trace.json.gz,
// pod.perfetto-trace), or with --trace-window, small traces of that window only. Prints the chosen tool's page
// (default: the overview, then the pod summary).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace podscope::cli {

struct AnalyzeFlags {
  std::string run_dir;
  std::string trace_window;
  std::string tool;  // a tool's name; empty: the overview, then the pod summary
};

void add_analyze_flags(CLI::App& command, AnalyzeFlags& flags);
int run_analyze_command(const AnalyzeFlags& flags);

}  // namespace podscope::cli
