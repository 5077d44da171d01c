// A pod analysed as a whole equals its hosts analysed apart and merged: each host file analysed alone in a run of
// its own, its step database written and read back, the databases merged in file order give the same outputs, byte
// for byte, as the run analysed at once. On a real 4-rank capture with skewed clocks, the TensorFlow file and a
// PyTorch DDP pod of three ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/renderers.h"
#include "analysis/runner/analysis_runner.h"
#include "tests/scratch_directory.h"
#include "tests/shared_testdata.h"

namespace podscope::analysis {
namespace {

namespace fs = std::filesystem;

// Every output of the tools that read the step database.
std::vector<std::string> step_outputs(const AnalysisOutcome& o) {
  return {serialize_deterministically(o.analysis),
          *render_pod_viewer_json(o.analysis),
          render_summary_text(o.analysis),
          serialize_deterministically(o.overview_page),
          serialize_deterministically(o.input_pipeline),
          o.recommendation_text};
}

void expect_merge_of_hosts_is_the_pod(const fs::path& run) {
  auto whole = analyze_run_files(run);
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto files = list_run_files(run);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_GT(files->size(), 0u);

  AnalysisOutcome merged;
  for (const fs::path& file : *files) {
    const podscope::testing::ScratchDirectory alone("host_merge");
    fs::copy_file(file, alone.path() / file.filename());
    auto host = analyze_run_files(alone.path());
    ASSERT_TRUE(host.ok()) << host.status();
    ASSERT_EQ(host->step_databases.size(), 1u);
    // What the host would send: its database as bytes.
    const std::string bytes = serialize_deterministically(host->step_databases[0]);
    ASSERT_TRUE(merged.step_databases.emplace_back().ParseFromString(bytes)) << file;
  }
  run_step_tools({}, merged);

  ASSERT_EQ(merged.step_databases.size(), whole->step_databases.size());
  for (size_t i = 0; i < merged.step_databases.size(); ++i) {
    EXPECT_EQ(serialize_deterministically(merged.step_databases[i]),
              serialize_deterministically(whole->step_databases[i]))
        << "host " << i;
  }
  const std::vector<std::string> expected = step_outputs(*whole);
  const std::vector<std::string> got = step_outputs(merged);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "output " << i << " of " << run;
  EXPECT_GT(whole->analysis.counts().steps(), 0u) << run;
}

TEST(HostMergeTest, ARealFourRankCaptureWithSkewedClocks) {
  expect_merge_of_hosts_is_the_pod(fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/analysis/ring_trainer_offsets");
}

TEST(HostMergeTest, TheTensorFlowFile) {
  const auto file = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!file) return;
  const podscope::testing::ScratchDirectory run("host_merge_tf");
  fs::copy_file(*file, run.path() / file->filename());
  expect_merge_of_hosts_is_the_pod(run.path());
}

TEST(HostMergeTest, APyTorchDdpPodOfThreeRanks) {
  expect_merge_of_hosts_is_the_pod(fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/kineto/h200_ddp_gloo_cuda");
}

}  // namespace
}  // namespace podscope::analysis
