// `podscope capture` takes capture_tpu_profile's command lines: its flags, defaults and absl boolean syntax.
#include "cli/capture_command.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tests/cli/command_flags.h"
#include "tests/run_command.h"

namespace podscope::cli {
namespace {

using podscope::testing::CommandResult;

CaptureFlags parse(std::vector<std::string> args) {
  return testing::parse_flags("capture", &add_capture_flags, std::move(args));
}

std::string capture_help() { return testing::help_of("capture", &add_capture_flags); }

CommandResult run_podscope(const std::string& args) {
  return podscope::testing::run_command(std::string(PODSCOPE_BINARY_DIR) + "/bin/podscope " + args);
}

TEST(CaptureFlags, DefaultsAreCaptureTpuProfiles) {
  const CaptureFlags flags = parse({});
  EXPECT_TRUE(flags.display_timestamp);
  EXPECT_TRUE(flags.include_dataset_ops);
  EXPECT_EQ(flags.num_tracing_attempts, 3);
  EXPECT_EQ(flags.host_tracer_level, 2);
  EXPECT_EQ(flags.monitoring_level, 0);
  EXPECT_EQ(flags.num_queries, 100);
  EXPECT_FALSE(flags.quiet);
}

TEST(CaptureFlags, BooleansTakeEveryAbslForm) {
  EXPECT_TRUE(parse({"--include_dataset_ops"}).include_dataset_ops);
  EXPECT_FALSE(parse({"--noinclude_dataset_ops"}).include_dataset_ops);
  EXPECT_FALSE(parse({"--include_dataset_ops=false"}).include_dataset_ops);
  EXPECT_TRUE(parse({"--include_dataset_ops=true"}).include_dataset_ops);
  EXPECT_FALSE(parse({"--include_dataset_ops=0"}).include_dataset_ops);
  EXPECT_TRUE(parse({"--display_timestamp"}).display_timestamp);
  EXPECT_FALSE(parse({"--nodisplay_timestamp"}).display_timestamp);
  EXPECT_FALSE(parse({"--display_timestamp=false"}).display_timestamp);
  EXPECT_THROW(parse({"--include_dataset_ops=maybe"}), CLI::ParseError);
}

TEST(CaptureFlags, ACaptureTpuProfileCommandLineParsesAsWritten) {
  const CaptureFlags flags =
      parse({"--service_addr=grpc://10.0.0.2:8466", "--logdir=/tmp/tb_log", "--duration_ms=600000",
             "--num_tracing_attempts=10", "--noinclude_dataset_ops", "--host_tracer_level=3", "--display_timestamp",
             "--workers_list=10.0.0.3:8466,10.0.0.4", "--monitoring_level=0", "--num_queries=5"});
  EXPECT_EQ(flags.service_addr, "grpc://10.0.0.2:8466");
  EXPECT_EQ(flags.logdir, "/tmp/tb_log");
  EXPECT_EQ(flags.duration_ms, 600000);
  EXPECT_EQ(flags.num_tracing_attempts, 10);
  EXPECT_FALSE(flags.include_dataset_ops);
  EXPECT_EQ(flags.host_tracer_level, 3);
  EXPECT_TRUE(flags.display_timestamp);
  EXPECT_EQ(flags.workers_list, "10.0.0.3:8466,10.0.0.4");
  EXPECT_EQ(flags.num_queries, 5);
}

TEST(CaptureFlags, HelpListsCaptureTpuProfilesFlagsAndTheCloudOnesNotAccepted) {
  const std::string help = capture_help();
  for (const char* flag : {"--service_addr", "--workers_list", "--logdir", "--duration_ms", "--num_tracing_attempts",
                           "--include_dataset_ops", "--noinclude_dataset_ops", "--host_tracer_level",
                           "--monitoring_level", "--num_queries", "--display_timestamp", "--nodisplay_timestamp"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag << " missing from\n" << help;
  }
  EXPECT_NE(help.find("except the Cloud TPU ones: --tpu, --tpu_zone and --gcp_project"), std::string::npos) << help;
}

TEST(CaptureFlags, UsageErrorsOfTheRealBinaryExit2) {
  const CommandResult bad_boolean =
      run_podscope("capture --service_addr=a:1 --logdir=/tmp/x --include_dataset_ops=maybe");
  EXPECT_EQ(bad_boolean.exit_code, 2) << bad_boolean.output;
  EXPECT_NE(bad_boolean.output.find("--include_dataset_ops"), std::string::npos) << bad_boolean.output;
  const CommandResult cloud = run_podscope("capture --tpu=my-tpu --logdir=/tmp/x");
  EXPECT_EQ(cloud.exit_code, 2) << cloud.output;
  EXPECT_NE(cloud.output.find("--tpu"), std::string::npos) << cloud.output;
  const CommandResult help = run_podscope("capture --help");
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_NE(help.output.find("--noinclude_dataset_ops"), std::string::npos) << help.output;
}

}  // namespace
}  // namespace podscope::cli
