#include "cli/analyze_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "analysis/runner/analysis_runner.h"

namespace podscope::cli {

void add_analyze_flags(CLI::App& command, AnalyzeFlags& flags) {
  command.add_option("run_dir", flags.run_dir, "Run directory (<logdir>/plugins/profile/<run>)")->required();
}

int run_analyze_command(const AnalyzeFlags& flags) {
  if (!std::filesystem::is_directory(flags.run_dir)) {
    std::cerr << "podscope analyze: " << flags.run_dir << " is not a directory\n";
    return 2;
  }
  auto outcome = analysis::analyze_run_directory(flags.run_dir);
  if (!outcome.ok()) {
    std::cerr << "podscope analyze: " << outcome.status().message() << "\n";
    return 1;
  }
  std::cout << outcome->summary_text;
  for (const auto& file : outcome->written_files) std::cout << "wrote " << file.string() << "\n";
  return 0;
}

}  // namespace podscope::cli
