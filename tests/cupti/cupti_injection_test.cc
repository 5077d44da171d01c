// libpodscope_cupti.so loaded into a real process without a GPU: the injection must keep the program
// running, report CUPTI's failure as XSpace warnings, and still deliver NVTX ranges as host events.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"
#include "tests/scratch_directory.h"

namespace {

using ::testing::HasSubstr;

TEST(CuptiInjectionTest, WithoutGpuTheProgramRunsWarningsAreRecordedAndNvtxRangesArrive) {
  const std::string lib = CUPTI_LIBRARY;
  const podscope::testing::ScratchDirectory scratch("cupti");
  const std::string trace = scratch.file("trace.xplane.pb");
  const std::string command = "PODSCOPE_CUPTI_TRACE_FILE=" + trace + " NVTX_INJECTION64_PATH=" + lib + " " +
                              CUPTI_PROBE + " " + lib + " > " + trace + ".out 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream log(trace + ".out");
  std::stringstream output;
  output << log.rdbuf();
  ASSERT_TRUE(WIFEXITED(status)) << output.str();
  ASSERT_EQ(WEXITSTATUS(status), 0) << output.str();
  EXPECT_THAT(output.str(), HasSubstr("probe done"));

  std::ifstream in(trace, std::ios::binary);
  ASSERT_TRUE(in) << "no trace file; output: " << output.str();
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromIstream(&in));
  // No GPU here: CUPTI refuses, and says so in the XSpace instead of taking the program down.
  ASSERT_GT(space.warnings_size(), 0) << output.str();
  EXPECT_THAT(space.warnings(0), HasSubstr("CUPTI: "));

  const auto* cpu = podscope::xspace::find_plane(space, "/host:CPU");
  ASSERT_NE(cpu, nullptr) << output.str();
  podscope::xspace::XPlaneReader reader(*cpu);
  ASSERT_EQ(cpu->lines_size(), 1);
  std::vector<std::string> names;
  reader.for_each_event(cpu->lines(0), [&](const podscope::xspace::XEventView& e) {
    names.emplace_back(e.name());
    EXPECT_GT(e.start_ns(), 1'600'000'000'000'000'000);  // host clock, Unix ns
  });
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("outer", "inner", "async"));
}

}  // namespace
