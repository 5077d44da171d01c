// `podscope analyze RUN_DIR`: the pod analysis of a captured run directory.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace podscope::cli {

struct AnalyzeFlags {
  std::string run_dir;
};

void add_analyze_flags(CLI::App& command, AnalyzeFlags& flags);
int run_analyze_command(const AnalyzeFlags& flags);

}  // namespace podscope::cli
