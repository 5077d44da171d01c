// `podscope analyze`'s --tool takes the name of every tool of the analysis' tool table, and nothing else.
#include "cli/analyze_command.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "analysis/runner/tools.h"

namespace podscope::cli {
namespace {

AnalyzeFlags parse(std::vector<std::string> args) {
  CLI::App app{"podscope"};
  AnalyzeFlags flags;
  add_analyze_flags(*app.add_subcommand("analyze"), flags);
  args.insert(args.begin(), "analyze");
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
  app.parse(args);
  return flags;
}

std::string analyze_help() {
  CLI::App app{"podscope"};
  AnalyzeFlags flags;
  auto* analyze = app.add_subcommand("analyze");
  add_analyze_flags(*analyze, flags);
  return analyze->help();
}

TEST(AnalyzeFlags, ToolTakesEveryToolOfTheTableAndItsHelpNamesThem) {
  const std::string help = analyze_help();
  for (const analysis::Tool& tool : analysis::analysis_tools()) {
    EXPECT_EQ(parse({"RUN", "--tool", std::string(tool.name)}).tool, tool.name);
    EXPECT_NE(help.find(std::string(tool.name)), std::string::npos) << help;
  }
}

TEST(AnalyzeFlags, ToolRefusesANameNotInTheTable) {
  EXPECT_THROW(parse({"RUN", "--tool", "flamegraph"}), CLI::ValidationError);
}

}  // namespace
}  // namespace podscope::cli
