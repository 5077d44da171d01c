// `podscope analyze` takes a run directory or files, and --tool the name of every tool of the analysis' tool table,
// and nothing else.
#include "cli/analyze_command.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

#include "analysis/tools/tool.h"
#include "tests/cli/command_flags.h"

namespace podscope::cli {
namespace {

AnalyzeFlags parse(std::vector<std::string> args) {
  return testing::parse_flags("analyze", &add_analyze_flags, std::move(args));
}

TEST(AnalyzeFlags, ToolTakesEveryToolOfTheTableAndItsHelpNamesThem) {
  const std::string help = testing::help_of("analyze", &add_analyze_flags);
  for (const analysis::Tool& tool : analysis::analysis_tools()) {
    EXPECT_EQ(parse({"RUN", "--tool", std::string(tool.name)}).tool, tool.name);
    EXPECT_NE(help.find(std::string(tool.name)), std::string::npos) << help;
  }
}

TEST(AnalyzeFlags, TakesARunDirectoryOrFilesAndWhereTheirOutputsGo) {
  EXPECT_EQ(parse({"RUN"}).inputs, std::vector<std::string>{"RUN"});
  const AnalyzeFlags files = parse({"a.json.gz", "b.pt.trace.json", "--out", "OUT"});
  EXPECT_EQ(files.inputs, (std::vector<std::string>{"a.json.gz", "b.pt.trace.json"}));
  EXPECT_EQ(files.out, "OUT");
  EXPECT_THROW(parse({"--tool", "pod"}), CLI::RequiredError);
}

TEST(AnalyzeFlags, ToolRefusesANameNotInTheTable) {
  EXPECT_THROW(parse({"RUN", "--tool", "flamegraph"}), CLI::ValidationError);
}

}  // namespace
}  // namespace podscope::cli
