// A run directory's names and listing: which files a run's readers see, in which order, and what a missing or empty
// run says.
#include "run_directory/run_directory.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>

#include "run_directory/run_file_reader.h"
#include "tests/scratch_directory.h"
#include "tests/storage/storage_servers.h"

namespace podscope::run_directory {
namespace {

TEST(RunFileNames, TorchProfilerTracesXSpacesAndJsonAreKnownByName) {
  EXPECT_TRUE(is_kineto_trace_file_name("host_123.1700000000000.pt.trace.json"));
  EXPECT_TRUE(is_kineto_trace_file_name("worker0.pt.trace.json.gz"));
  EXPECT_FALSE(is_kineto_trace_file_name("host0.xplane.pb"));
  EXPECT_FALSE(is_kineto_trace_file_name("pod.trace.json.gz"));  // our own merged trace
  EXPECT_TRUE(is_xspace_file_name("host0.xplane.pb"));
  EXPECT_FALSE(is_xspace_file_name(".xplane.pb"));
  EXPECT_TRUE(is_json_file_name("rank3.json.gz"));
  EXPECT_TRUE(is_json_file_name("capture.json"));
  EXPECT_FALSE(is_json_file_name(".json"));
  EXPECT_FALSE(is_json_file_name("notes.txt"));
}

TEST(RunFileNames, AStemIsTheNameWithoutItsProfileSuffix) {
  EXPECT_EQ(file_stem(host_file_name("10.0.0.2_8466")), "10.0.0.2_8466");
  EXPECT_EQ(file_stem("worker0.pt.trace.json.gz"), "worker0");
  EXPECT_EQ(file_stem("worker0.pt.trace.json"), "worker0");
  EXPECT_EQ(file_stem("rank3.json.gz"), "rank3");
  EXPECT_EQ(file_stem("notes.txt"), "notes.txt");
}

std::vector<std::string> names_of(const std::vector<RunFile>& files) {
  std::vector<std::string> names;
  for (const RunFile& file : files) names.push_back(file.name);
  return names;
}

// Which files of a run are its profile files: XSpaces and torch.profiler traces by name, other JSON by its start (as
// HTA reads a directory); other JSON is noted, the run's own outputs and anything else left out silently.
TEST(RunDirectory, ListsProfileFilesByNameWithTheirSizesAndChromeTracesByTheirContent) {
  const testing::ScratchDirectory dir("run-listing");
  for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
           {"b.xplane.pb", "xxx"},
           {"a.xplane.pb", "xxxxx"},
           {"w.pt.trace.json.gz", "x"},
           {"rank7.json", R"({"schemaVersion": 1, "traceEvents": [{"ph": "X"}]})"},
           {"notes.json", R"({"traceEvents_not": []})"},
           {"notes.txt", "not JSON, not noted"},
           {"capture.json", R"({"hosts": []})"},
           {"pod.trace.json.gz", R"({"traceEvents":[]})"},
           {"overview_page.pb", "x"},
           {"overview_page.json", R"({"traceEvents":[]})"}}) {
    std::ofstream(dir.path() / name) << text;
  }
  std::filesystem::create_directory(dir.path() / "c.xplane.pb");  // a directory is no file
  std::vector<std::string> notes;
  const absl::StatusOr<std::vector<RunFile>> files = list_run_files(dir.path(), &notes);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(names_of(*files),
            (std::vector<std::string>{"a.xplane.pb", "b.xplane.pb", "rank7.json", "w.pt.trace.json.gz"}));
  EXPECT_EQ((*files)[0].size, 5u);
  EXPECT_EQ((*files)[0].location(), (dir.path() / "a.xplane.pb").string());
  EXPECT_EQ(notes, std::vector<std::string>{
                       "ignored notes.json: not a Chrome trace (no traceEvents array in its first 1024 KiB)"});
}

TEST(RunDirectory, AMissingOrEmptyRunIsNotFoundNamingIt) {
  const testing::ScratchDirectory dir("run-empty");
  const auto missing = list_run_files(dir.path() / "nope");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  const auto empty = list_run_files(dir.path());
  EXPECT_TRUE(absl::IsNotFound(empty.status()));
  EXPECT_NE(empty.status().message().find("no *.xplane.pb files"), std::string::npos);
}

// Files given by themselves: each in its own directory's run, sorted, refused by name when no file or no profile.
TEST(RunDirectory, FilesGivenAreCheckedByNameOrContentAndSorted) {
  const testing::ScratchDirectory dir("run-given");
  std::filesystem::create_directory(dir.path() / "x");
  std::ofstream(dir.path() / "x" / "b.json") << R"({"traceEvents": [)";
  std::ofstream(dir.path() / "a.xplane.pb") << "x";
  std::ofstream(dir.path() / "readme.txt") << "not a profile";
  const std::string a = (dir.path() / "a.xplane.pb").string(), b = (dir.path() / "x" / "b.json").string();
  const auto checked = check_run_files({b, a});
  ASSERT_TRUE(checked.ok()) << checked.status();
  ASSERT_EQ(checked->size(), 2u);
  EXPECT_EQ((*checked)[0].location(), a);
  EXPECT_EQ((*checked)[1].location(), b);
  EXPECT_EQ((*checked)[1].run.local_path(), dir.path() / "x");
  const auto not_a_profile = check_run_files({a, (dir.path() / "readme.txt").string()});
  EXPECT_TRUE(absl::IsInvalidArgument(not_a_profile.status()));
  EXPECT_NE(not_a_profile.status().message().find("readme.txt is neither an XSpace"), std::string::npos);
  const auto missing = check_run_files({(dir.path() / "absent.json").string()});
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("absent.json is not a file"), std::string::npos);
  const auto fifo_path = dir.path() / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo_path.c_str(), 0600), 0);
  EXPECT_TRUE(absl::IsNotFound(check_run_files({fifo_path.string()}).status()));  // never blocks on it
}

TEST(RunDirectory, AClaimNeverTakesARunThatIsThere) {
  const testing::ScratchDirectory dir("run-claim");
  const RunDirectory wanted = RunDirectory::in_logdir(dir.path(), "2026_11_22_10_00_00");
  EXPECT_EQ(wanted.local_path(), dir.path() / "plugins" / "profile" / "2026_11_22_10_00_00");
  const auto first = wanted.claim();
  const auto second = wanted.claim();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->name(), "2026_11_22_10_00_00");
  EXPECT_EQ(second->name(), "2026_11_22_10_00_00_1");
}

// A run in a bucket is listed, sniffed and read as a local one is: its JSON files' starts are read through the store,
// and a trace is converted as it streams from its object.
TEST(RunDirectory, ABucketRunIsListedAndItsTracesReadAsALocalRunsAre) {
  if (!testing::storage_servers_installed()) return;
  testing::SeaweedS3 s3;
  testing::ScopedEnvironment env(s3.environment());
  const testing::ScratchDirectory local("run-local");
  tensorflow::profiler::XSpace space;
  space.add_planes()->set_name("/host:CPU");
  space.add_hostnames("host0");
  const std::vector<std::pair<std::string, std::string>> files = {
      {"host0.xplane.pb", space.SerializeAsString()},
      {"rank1.json", R"({"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", )"
                     R"("pid": 1, "tid": 1, "ts": 5, "dur": 3}]})"},
      {"notes.json", R"({"traceEvents_not": []})"}};
  absl::StatusOr<RunDirectory> bucket = RunDirectory::open("s3://runs/logs/run1");
  ASSERT_TRUE(bucket.ok()) << bucket.status();
  for (const auto& [name, content] : files) {
    ASSERT_TRUE(bucket->write(name, content, Durability::kRebuildable).ok()) << name;
    std::ofstream(local.path() / name) << content;
  }
  std::vector<std::string> bucket_notes, local_notes;
  const auto in_bucket = list_run_files(*bucket, &bucket_notes);
  const auto on_disk = list_run_files(local.path(), &local_notes);
  ASSERT_TRUE(in_bucket.ok()) << in_bucket.status();
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_EQ(names_of(*in_bucket), (std::vector<std::string>{"host0.xplane.pb", "rank1.json"}));
  EXPECT_EQ(names_of(*in_bucket), names_of(*on_disk));
  EXPECT_EQ(bucket_notes, local_notes);
  EXPECT_EQ((*in_bucket)[1].location(), "s3://runs/logs/run1/rank1.json");
  const auto planes_of = [](const RunFile& file) {
    std::vector<std::string> planes;
    RunFileReader reader;
    const absl::Status read = reader.read_planes(file, [&](const tensorflow::profiler::XPlane& plane) {
      planes.push_back(plane.name() + ":" + std::to_string(plane.lines_size()));
      return absl::OkStatus();
    });
    EXPECT_TRUE(read.ok()) << read;
    return planes;
  };
  for (size_t i = 0; i < in_bucket->size(); ++i) {
    EXPECT_EQ(planes_of((*in_bucket)[i]), planes_of((*on_disk)[i])) << (*in_bucket)[i].name;
    EXPECT_FALSE(planes_of((*in_bucket)[i]).empty());
  }
  const auto given = check_run_files({"s3://runs/logs/run1/rank1.json"});
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->front().run.location(), "s3://runs/logs/run1");
  EXPECT_TRUE(absl::IsInvalidArgument(check_run_files({"s3://runs/logs/run1/notes.json"}).status()));
}

}  // namespace
}  // namespace podscope::run_directory
