// Per-host databases: a run analysed leaves each host's analysis beside its file, and the next analysis merges them
// instead of reading the files, giving the same outputs byte for byte; a database that does not match its file (from
// another file, another build's analysis, corrupt, or its file changed) is never merged: the file is analysed again and
// a note says why. Hosts analysed in parallel, or shard by shard and then merged, give the same outputs too. On the
// real 4-rank capture with skewed clocks and a PyTorch DDP pod of three ranks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "analysis/runner/analysis_runner.h"
#include "podscope/v1/host_analysis.pb.h"
#include "tests/scratch_directory.h"

namespace podscope::analysis {
namespace {

namespace fs = std::filesystem;

const fs::path kRingTrainer = fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/analysis/ring_trainer_offsets";
const fs::path kDdpPod = fs::path(PODSCOPE_SOURCE_DIR) / "tests/data/kineto/h200_ddp_gloo_cuda";

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void put(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A run of its own: the recorded run's files copied.
struct CopiedRun {
  explicit CopiedRun(const fs::path& recorded) : scratch("host_databases") {
    for (const auto& entry : fs::directory_iterator(recorded)) fs::copy(entry.path(), scratch.path());
  }
  const fs::path& path() const { return scratch.path(); }
  fs::path database_of(const std::string& host_file) const {
    return scratch.path() / host_analysis_file_name(host_file);
  }
  podscope::testing::ScratchDirectory scratch;
};

// An analysis of the run: every output file's bytes by name, the summary and the recommendation, and what it merged.
struct Analysed {
  std::map<std::string, std::string> outputs;
  size_t hosts = 0;
  size_t hosts_from_databases = 0;
  std::vector<std::string> notes;
};

Analysed analyze(const fs::path& run, int jobs = 1) {
  Analysed analysed;
  AnalysisOptions options;
  options.jobs = jobs;
  options.report_title = "run";  // not the directory's name: two copies of a run compare alike
  absl::StatusOr<AnalysisOutcome> outcome = analyze_run_directory(run, options);
  EXPECT_TRUE(outcome.ok()) << outcome.status();
  if (!outcome.ok()) return analysed;
  for (const std::string& file : outcome->written_files) {
    analysed.outputs[fs::path(file).filename()] = contents(file);
    fs::remove(file);
  }
  analysed.outputs["(summary)"] = outcome->summary_text;
  analysed.outputs["(recommendation)"] = outcome->recommendation_text;
  analysed.hosts = outcome->step_databases.size();
  analysed.hosts_from_databases = outcome->hosts_from_databases;
  analysed.notes = outcome->database_notes;
  return analysed;
}

void expect_same_outputs(const Analysed& got, const Analysed& expected) {
  ASSERT_EQ(got.outputs.size(), expected.outputs.size());
  for (const auto& [name, bytes] : expected.outputs) {
    ASSERT_TRUE(got.outputs.contains(name)) << name;
    EXPECT_TRUE(got.outputs.at(name) == bytes) << name << " differs";
  }
}

void expect_merged_databases_are_the_analysis(const fs::path& recorded, size_t hosts) {
  const CopiedRun run(recorded);
  const Analysed analysed = analyze(run.path());
  EXPECT_EQ(analysed.hosts, hosts);
  EXPECT_EQ(analysed.hosts_from_databases, 0u);
  EXPECT_TRUE(analysed.notes.empty());
  size_t databases = 0;
  for (const auto& entry : fs::directory_iterator(run.path())) {
    databases += entry.path().string().ends_with(kHostAnalysisSuffix) ? 1 : 0;
  }
  EXPECT_EQ(databases, hosts);

  const Analysed merged = analyze(run.path());
  EXPECT_EQ(merged.hosts_from_databases, hosts);
  EXPECT_TRUE(merged.notes.empty());
  expect_same_outputs(merged, analysed);
}

TEST(HostDatabasesTest, ARealCaptureMergedFromItsHostDatabasesGivesTheSameOutputs) {
  expect_merged_databases_are_the_analysis(kRingTrainer, 4);
}

TEST(HostDatabasesTest, AKinetoRunMergedFromItsHostDatabasesGivesTheSameOutputs) {
  expect_merged_databases_are_the_analysis(kDdpPod, 3);
}

// Each way a database can fail to match its file: the file is analysed again (and its database made again), the
// outputs are those of the run as it now is, and a note names the database and why.
TEST(HostDatabasesTest, ADatabaseThatDoesNotMatchItsFileIsNeverMerged) {
  const CopiedRun run(kRingTrainer);
  const Analysed fresh = analyze(run.path());

  // Host 1's database is host 0's; host 2's is corrupt; host 3's was made by other analysis code.
  fs::copy_file(run.database_of("host0.xplane.pb"), run.database_of("host1.xplane.pb"),
                fs::copy_options::overwrite_existing);
  put(run.database_of("host2.xplane.pb"), "not a database");
  podscope::v1::HostAnalysisFile other_build;
  ASSERT_TRUE(other_build.ParseFromString(contents(run.database_of("host3.xplane.pb"))));
  EXPECT_EQ(other_build.analysis_build(), host_analysis_build());
  other_build.set_analysis_build("0123456789abcdef");
  put(run.database_of("host3.xplane.pb"), other_build.SerializeAsString());
  const Analysed mismatched = analyze(run.path());
  EXPECT_EQ(mismatched.hosts_from_databases, 1u);
  ASSERT_EQ(mismatched.notes.size(), 3u);
  EXPECT_NE(mismatched.notes[0].find("it was made from host0.xplane.pb"), std::string::npos) << mismatched.notes[0];
  EXPECT_NE(mismatched.notes[1].find("does not parse"), std::string::npos) << mismatched.notes[1];
  EXPECT_NE(mismatched.notes[2].find("made by another build's analysis (0123456789ab"), std::string::npos)
      << mismatched.notes[2];
  expect_same_outputs(mismatched, fresh);
  // They were made again from their files.
  EXPECT_EQ(analyze(run.path()).hosts_from_databases, 4u);

  // Host 3's file replaced by other bytes (host 0's, under host 3's name): its database is stale.
  fs::copy_file(run.path() / "host0.xplane.pb", run.path() / "host3.xplane.pb", fs::copy_options::overwrite_existing);
  const Analysed changed = analyze(run.path());
  EXPECT_EQ(changed.hosts_from_databases, 3u);
  ASSERT_EQ(changed.notes.size(), 1u);
  EXPECT_NE(changed.notes[0].find("host3.xplane.pb.host_analysis.pb not used (the host file changed"),
            std::string::npos)
      << changed.notes[0];
  for (int host = 0; host < 4; ++host) fs::remove(run.database_of("host" + std::to_string(host) + ".xplane.pb"));
  expect_same_outputs(changed, analyze(run.path()));
}

// A file written again in place with bytes of the same size has a new version (its modification time): its
// database is stale.
TEST(HostDatabasesTest, AFileRewrittenInPlaceWithTheSameSizeIsAnalysedAgain) {
  const CopiedRun run(kRingTrainer);
  const Analysed fresh = analyze(run.path());
  const fs::path host2 = run.path() / "host2.xplane.pb";
  const std::string bytes = contents(host2);
  {
    std::fstream same_inode(host2, std::ios::binary | std::ios::in | std::ios::out);
    same_inode << bytes;  // the same bytes, written again: only the time changes
  }
  const Analysed again = analyze(run.path());
  EXPECT_EQ(again.hosts_from_databases, 3u);
  ASSERT_EQ(again.notes.size(), 1u);
  EXPECT_NE(again.notes[0].find("host2.xplane.pb.host_analysis.pb not used (the host file changed"), std::string::npos)
      << again.notes[0];
  expect_same_outputs(again, fresh);
}

// The version, not the bytes, ties a database to its file: a merge reads no host file. Shown by a host file whose
// bytes are replaced under the same inode, size and time: the merge still gives the analysis of what was there.
TEST(HostDatabasesTest, AMergeReadsNoHostFile) {
  const CopiedRun run(kRingTrainer);
  const Analysed fresh = analyze(run.path());
  for (int host = 0; host < 4; ++host) {
    const fs::path file = run.path() / ("host" + std::to_string(host) + ".xplane.pb");
    struct stat before {};
    ASSERT_EQ(::stat(file.c_str(), &before), 0);
    {
      std::fstream same_inode(file, std::ios::binary | std::ios::in | std::ios::out);
      same_inode << std::string(static_cast<size_t>(before.st_size), '\xff');  // no XSpace parses from this
    }
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), times, 0), 0);
  }
  const Analysed merged = analyze(run.path());
  EXPECT_EQ(merged.hosts_from_databases, 4u);
  EXPECT_TRUE(merged.notes.empty());
  expect_same_outputs(merged, fresh);
}

TEST(HostDatabasesTest, HostsAnalysedInParallelGiveTheSameOutputs) {
  for (const fs::path& recorded : {kRingTrainer, kDdpPod}) {
    const CopiedRun one_at_a_time(recorded), parallel(recorded);
    const Analysed expected = analyze(one_at_a_time.path(), 1);
    const Analysed got = analyze(parallel.path(), 3);
    EXPECT_EQ(got.hosts_from_databases, 0u);
    expect_same_outputs(got, expected);
  }
}

// Three shards analysed apart (as three machines would), then the run merged: the whole run's outputs.
TEST(HostDatabasesTest, ShardsAnalysedApartThenMergedGiveTheWholeAnalysis) {
  for (const fs::path& recorded : {kRingTrainer, kDdpPod}) {
    const CopiedRun whole(recorded), sharded(recorded);
    const Analysed expected = analyze(whole.path());
    size_t written = 0;
    for (int shard = 0; shard < 3; ++shard) {
      run_directory::RunFileReader reader;
      absl::StatusOr<ShardOutcome> outcome = analyze_run_shard(sharded.path(), {shard, 3}, {}, reader);
      ASSERT_TRUE(outcome.ok()) << outcome.status();
      EXPECT_TRUE(outcome->bad_files.empty());
      written += outcome->written.size();
    }
    EXPECT_EQ(written, expected.hosts);
    // No pod output was written by the shards.
    EXPECT_FALSE(fs::exists(sharded.path() / "report.html"));
    const Analysed merged = analyze(sharded.path());
    EXPECT_EQ(merged.hosts_from_databases, expected.hosts);
    expect_same_outputs(merged, expected);
  }
}

TEST(HostDatabasesTest, AShardOutsideItsCountIsRefused) {
  const CopiedRun run(kRingTrainer);
  run_directory::RunFileReader reader;
  for (const HostShard shard : {HostShard{3, 3}, HostShard{-1, 3}, HostShard{0, 0}}) {
    absl::StatusOr<ShardOutcome> outcome = analyze_run_shard(run.path(), shard, {}, reader);
    EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument) << shard.index << "/" << shard.count;
  }
}

}  // namespace
}  // namespace podscope::analysis
