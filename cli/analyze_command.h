// `podscope analyze RUN_DIR | FILE... [--out DIR] [--trace-window A:B|step:N] [--tool NAME]`: the pod analysis and the
// tools of a captured run directory, or of the profile files given (XSpaces and Chrome traces, as HTA and Perfetto's
// UI take files), (the tool table, analysis/tools/tool.h) and its merged traces (pod.trace.json.gz,
// pod.perfetto-trace), or with --trace-window, small traces of that window only. Prints the chosen tool's page
// (default: the overview, then the pod summary), through terminal_text.h like everything it prints.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace podscope::cli {

struct AnalyzeFlags {
  std::vector<std::string> inputs;  // one run directory, or files
  std::string out;                  // where the outputs of files go; empty: the first file's directory
  std::string trace_window;
  std::string tool;  // a tool's name; empty: the overview, then the pod summary
};

void add_analyze_flags(CLI::App& command, AnalyzeFlags& flags);
int run_analyze_command(const AnalyzeFlags& flags);

}  // namespace podscope::cli
