// `podscope analyze RUN_DIR | FILE... [--out DIR] [--trace-window A:B|step:N] [--trace-max-hosts N] [--tool NAME]
// [--jobs N] [--hosts I/N]`: the pod analysis and the
// tools of a captured run directory, or of the profile files given (XSpaces and Chrome traces, as HTA and Perfetto's
// UI take files), (the tool table, analysis/tools/tool.h) and its merged traces (pod.trace.json.gz,
// pod.perfetto-trace; none for a run of more than --trace-max-hosts hosts), or with --trace-window, small traces of
// that window only. Prints the chosen tool's page
// (default: the overview, then the pod summary), through terminal_text.h like everything it prints. With --hosts I/N,
// only shard I of N of a run's hosts is analysed, into their per-host databases (analysis_runner.h): the same command
// without --hosts then merges every shard's.
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
  std::string tool;         // a tool's name; empty: the overview, then the pod summary
  int jobs = 1;             // host files analysed at once; add_analyze_flags defaults it to the machine's cores
  std::string hosts;        // "I/N": only shard I of N of the run's hosts; empty: the whole run
  int trace_max_hosts = 0;  // a whole run of more hosts gets no pod trace; add_analyze_flags sets the default
};

void add_analyze_flags(CLI::App& command, AnalyzeFlags& flags);
int run_analyze_command(const AnalyzeFlags& flags);

}  // namespace podscope::cli
