// A pod analysed as a whole equals its hosts analysed apart and merged: each host file analysed alone, its analysis
// (step database and every tool's part) written as bytes and read back, the analyses merged in file order give the
// same outputs, byte for byte, as the run analysed at once: every tool's files, page and report tab, the pod summary.
// On a real 4-rank capture with skewed clocks, the synthetic pod with every tool's events, a pod of two with a
// straggler, two CPU programs' hosts, the TensorFlow file and a PyTorch DDP pod of three ranks (GPU streams and
// launches: the trace analysis).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/rendering/renderers.h"
#include "proto/xspace/serialize.h"
#include "analysis/runner/analysis_runner.h"
#include "tests/analysis/synthetic_pod.h"
#include "tests/scratch_directory.h"
#include "tests/shared_testdata.h"

namespace podscope::analysis {
namespace {

namespace fs = std::filesystem;

// Every output of every tool: its files, its page, its tab's data; the pod summary and the recommendation.
std::vector<std::string> outputs(const AnalysisOutcome& o) {
  std::vector<std::string> out = {o.summary_text, o.recommendation_text};
  for (const auto& result : o.results) {
    for (const ToolFile& file : result->files(o)) out.push_back(file.name + ": " + file.content.value_or("(error)"));
    out.push_back(result->page(o));
    out.push_back(result->tab_json(o).value_or("(error)"));
  }
  return out;
}

void expect_merge_of_hosts_is_the_pod(const fs::path& run) {
  auto whole = analyze_run_files(run);
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto files = run_directory::list_run_files(run);
  ASSERT_TRUE(files.ok()) << files.status();

  std::vector<podscope::v1::HostAnalysis> hosts;
  for (const run_directory::RunFile& file : *files) {
    run_directory::RunFileReader reader;
    auto host = analyze_host_file(file, reader);
    ASSERT_TRUE(host.ok()) << host.status();
    // What the host would send: its analysis as bytes.
    const std::string bytes = *xspace::serialize_deterministically(*host);
    ASSERT_TRUE(hosts.emplace_back().ParseFromString(bytes)) << file.location();
    EXPECT_EQ(*xspace::serialize_deterministically(hosts.back()), bytes) << file.location();
  }
  const AnalysisOutcome merged = merge_host_analyses(std::move(hosts), {});

  ASSERT_EQ(merged.step_databases.size(), whole->step_databases.size());
  const std::vector<std::string> expected = outputs(*whole);
  const std::vector<std::string> got = outputs(merged);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "output " << i << " of " << run;
  EXPECT_GT(whole->analysis.counts().steps(), 0u) << run;
}

TEST(HostMergeTest, ARealFourRankCaptureWithSkewedClocks) {
  expect_merge_of_hosts_is_the_pod(fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/analysis/ring_trainer_offsets");
}

// Hosts with annotated cores and input stages beside TensorFlow GPU hosts with kernels, ops, tf.data and allocator
// events: every tool has a part on some host.
TEST(HostMergeTest, ASyntheticPodWithEveryToolsEvents) {
  const podscope::testing::ScratchDirectory run("host_merge_synthetic");
  testing::SyntheticPodSpec spec;
  spec.steps = 6;
  spec.input_stages = true;
  spec.tensorflow_gpu_odd_ranks = true;
  ASSERT_TRUE(testing::write_synthetic_pod(run.path(), spec));
  expect_merge_of_hosts_is_the_pod(run.path());
}

// Two annotated ranks, one the straggler the other waits for: who waits for whom is decided across hosts.
TEST(HostMergeTest, APodOfTwoWithAStraggler) {
  const podscope::testing::ScratchDirectory run("host_merge_two");
  testing::SyntheticPodSpec spec;
  spec.ranks = 2;
  spec.straggler_rank = 1;
  spec.straggler_delay_ns = 20'000'000;
  ASSERT_TRUE(testing::write_synthetic_pod(run.path(), spec));
  expect_merge_of_hosts_is_the_pod(run.path());
}

// Programs without devices: each host's /host:CPU is a core of the pod view.
TEST(HostMergeTest, TwoCpuProgramsHostsAsCores) {
  const podscope::testing::ScratchDirectory run("host_merge_cpu");
  testing::SyntheticPodSpec spec;
  spec.ranks = 2;
  spec.cpu_program = true;
  spec.input_delay_ns = 10'000'000;
  ASSERT_TRUE(testing::write_synthetic_pod(run.path(), spec));
  expect_merge_of_hosts_is_the_pod(run.path());
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
