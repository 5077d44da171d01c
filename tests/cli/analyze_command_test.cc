// The real `podscope analyze`: names with control bytes reach the terminal escaped, files given are analysed as a
// run directory is, their outputs where --out says, and a run's hosts are analysed shard by shard and then merged.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "tests/run_command.h"
#include "tests/scratch_directory.h"

namespace podscope::cli {
namespace {

using podscope::testing::CommandResult;
namespace fs = std::filesystem;

// `podscope analyze` with `arguments`: its exit code and what it printed.
CommandResult podscope_analyze(const std::string& arguments) {
  return podscope::testing::run_command(std::string(PODSCOPE_BINARY_DIR) + "/bin/podscope analyze " + arguments);
}

// A CPU-only rank (gloo) of 4 steps whose thread, op and input stage are named with ESC sequences, BEL and NUL, as
// JSON escapes (a raw control byte inside a JSON string is refused by the parser).
std::string trace_with_control_bytes(int rank) {
  std::string events =
      R"({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main\u001b]0;t\u0007"}})";
  for (int step = 0; step < 4; ++step) {
    const std::string t = std::to_string(step * 10000), op_t = std::to_string(step * 10000 + 1100);
    events += R"(, {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)" + std::to_string(step) +
              R"(", "pid": 1, "tid": 1, "ts": )" + t + R"(, "dur": 9000})";
    events += R"(, {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#\u001b[2Jloader",)"
              R"( "pid": 1, "tid": 1, "ts": )" +
              t + R"(, "dur": 1000})";
    events += R"(, {"ph": "X", "cat": "cpu_op", "name": "aten::\u001b[31mred\u0000nul\u0007bel", "pid": 1, "tid": 1,)"
              R"( "ts": )" +
              op_t + R"(, "dur": 5000, "args": {"External id": 1}})";
  }
  return R"({"distributedInfo": {"backend": "gloo", "rank": )" + std::to_string(rank) +
         R"(, "world_size": 2}, "traceEvents": [)" + events + R"(], "baseTimeNanoseconds": 1700000000000000000})";
}

// Every byte a terminal would act on, other than the newline and the tab.
std::string control_bytes_in(const std::string& text) {
  std::string found;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\n' && c != '\t') || byte == 0x7f) found += std::to_string(byte) + " ";
  }
  return found;
}

TEST(PodscopeAnalyze, NamesWithControlBytesReachTheTerminalEscaped) {
  const podscope::testing::ScratchDirectory run("analyze_escapes");
  std::ofstream(run.path() / "rank0.pt.trace.json") << trace_with_control_bytes(0);
  // A bad file whose name holds an escape sequence: the warning names it.
  std::ofstream(run.path() / "broken\x1b[2J.pt.trace.json") << "{\"traceEvents\": [";
  for (const std::string tool : {"", " --tool op_stats", " --tool input_pipeline"}) {
    const CommandResult analyzed = podscope_analyze("'" + run.path().string() + "'" + tool);
    EXPECT_EQ(analyzed.exit_code, 3) << analyzed.output;  // the broken file skipped
    EXPECT_EQ(control_bytes_in(analyzed.output), "") << tool << "\n" << analyzed.output;
    EXPECT_NE(analyzed.output.find("skipped " + run.path().string() + "/broken\\x1b[2J.pt.trace.json"),
              std::string::npos)
        << analyzed.output;
  }
  const CommandResult ops = podscope_analyze(run.path().string() + " --tool op_stats");
  EXPECT_NE(ops.output.find("aten::\\x1b[31mred\\x00nul\\x07bel"), std::string::npos) << ops.output;
  const CommandResult input = podscope_analyze(run.path().string() + " --tool input_pipeline");
  EXPECT_NE(input.output.find("enumerate(DataLoader)#\\x1b[2Jloader"), std::string::npos) << input.output;
}

TEST(PodscopeAnalyze, FilesGivenAreAnalysedAsADirectoryWithTheOutputsInOut) {
  const podscope::testing::ScratchDirectory traces("analyze_files"), out("analyze_out");
  std::ofstream(traces.path() / "a.json") << trace_with_control_bytes(0);
  std::ofstream(traces.path() / "b.json") << trace_with_control_bytes(1);
  std::ofstream(traces.path() / "readme.txt") << "not a profile";
  const std::string a = (traces.path() / "a.json").string(), b = (traces.path() / "b.json").string();
  const CommandResult analyzed = podscope_analyze(a + " " + b + " --out " + out.path().string());
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.output;
  EXPECT_NE(analyzed.output.find("pod analysis: 2 cores"), std::string::npos) << analyzed.output;
  for (const char* written : {"pod_viewer.json", "report.html", "overview_page.json", "pod.trace.json.gz"}) {
    EXPECT_TRUE(fs::exists(out.path() / written)) << written;
    EXPECT_FALSE(fs::exists(traces.path() / written)) << written;
  }
  // Without --out, beside the first file.
  ASSERT_EQ(podscope_analyze(b + " " + a).exit_code, 0);
  EXPECT_TRUE(fs::exists(traces.path() / "pod_viewer.json"));
  // What is no profile, or no file, is refused by name before anything is read.
  const CommandResult not_a_profile = podscope_analyze(a + " " + (traces.path() / "readme.txt").string());
  EXPECT_EQ(not_a_profile.exit_code, 2);
  EXPECT_NE(not_a_profile.output.find("readme.txt is neither an XSpace"), std::string::npos) << not_a_profile.output;
  const CommandResult missing = podscope_analyze(a + " " + (traces.path() / "absent.json").string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("absent.json is not a file"), std::string::npos) << missing.output;
}

// `--hosts I/N` on a real 4-rank capture: each shard writes its hosts' databases and no pod output, the same command
// without --hosts merges them (analysing no host), and a shard that is not one of N is refused naming why.
TEST(PodscopeAnalyze, ShardsWriteTheirHostsDatabasesAndTheRunWithoutHostsMergesThem) {
  const podscope::testing::ScratchDirectory run("analyze_shards");
  for (const auto& entry :
       fs::directory_iterator(fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/analysis/ring_trainer_offsets")) {
    fs::copy(entry.path(), run.path());
  }
  const std::string dir = run.path().string();
  for (const auto& [bad, why] :
       {std::pair{"2/2", "I must be from 0 to N - 1 (1)"}, std::pair{"0/0", "N must be at least 1"},
        std::pair{"1", "expected I/N"}, std::pair{"a/b", "expected I/N"}}) {
    const CommandResult refused = podscope_analyze(dir + " --hosts " + bad);
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_NE(refused.output.find(why), std::string::npos) << refused.output;
  }
  for (const char* shard : {"0/2", "1/2"}) {
    const CommandResult analyzed = podscope_analyze(dir + " --jobs 2 --hosts " + shard);
    ASSERT_EQ(analyzed.exit_code, 0) << analyzed.output;
    EXPECT_NE(analyzed.output.find("shard " + std::string(shard) + ": 2 host databases"), std::string::npos)
        << analyzed.output;
  }
  EXPECT_FALSE(fs::exists(run.path() / "report.html"));
  for (int host = 0; host < 4; ++host) {
    EXPECT_TRUE(fs::exists(run.path() / ("host" + std::to_string(host) + ".xplane.pb.host_analysis.pb"))) << host;
  }
  const CommandResult merged = podscope_analyze(dir);
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_NE(merged.output.find("4 of 4 hosts merged from their host databases"), std::string::npos) << merged.output;
  EXPECT_TRUE(fs::exists(run.path() / "report.html"));
}

}  // namespace
}  // namespace podscope::cli
