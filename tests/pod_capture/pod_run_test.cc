// The pod run shared by the CLI and the coordinator, against lightweight agents on loopback: capture, the
// run directory, the pod analysis beside it and the summary; and the one place capture defaults are applied.
#include "pod_capture/pod_run.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "daemon/run_name.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"
#include "tests/pod_capture/lightweight_agent.h"
#include "tests/pod_capture/lightweight_pod.h"
#include "tests/pod_capture/small_disk.h"
#include "tests/scratch_directory.h"

namespace podscope::pod_capture {
namespace {

using testing::LightweightAgent;
using testing::LightweightAgentOptions;
using testing::TimerThread;
using Pod = testing::LightweightPod;

CaptureSpec quick_spec(const std::string& run_name) {
  podscope::v1::CaptureRequest request;
  request.set_duration_ms(300);
  request.set_include_dataset_ops(true);
  request.set_host_tracer_level(2);
  return capture_spec_from(request, run_name, Clock().now_ns());
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(CaptureSpecFrom, AppliesTheDefaultsForWhatTheRequestLeavesUnset) {
  const int64_t now_ns = Clock().now_ns();
  const CaptureSpec spec = capture_spec_from(podscope::v1::CaptureRequest(), "", now_ns);
  EXPECT_EQ(spec.duration_ms, kDefaultCaptureDurationMs);
  EXPECT_EQ(spec.num_tracing_attempts, CaptureSpec().num_tracing_attempts);
  EXPECT_EQ(spec.delay_ms, 0);
  EXPECT_EQ(spec.session_id, tf_run_name(now_ns)) << "an unnamed run gets TensorFlow's name for now";
}

TEST(CaptureSpecFrom, KeepsWhatTheRequestGives) {
  podscope::v1::CaptureRequest request;
  request.add_hosts("host0");
  request.set_duration_ms(2500);
  request.set_num_tracing_attempts(5);
  request.set_delay_ms(40);
  request.set_include_dataset_ops(false);
  request.set_host_tracer_level(3);
  request.set_device_tracer_level(0);
  request.set_python_tracer_level(1);
  const CaptureSpec spec = capture_spec_from(request, "tb_session", 0);
  EXPECT_EQ(spec.duration_ms, 2500);
  EXPECT_EQ(spec.num_tracing_attempts, 5);
  EXPECT_EQ(spec.delay_ms, 40);
  EXPECT_FALSE(spec.include_dataset_ops);
  EXPECT_EQ(spec.host_tracer_level, 3u);
  EXPECT_EQ(spec.device_tracer_level, 0u);
  EXPECT_EQ(spec.python_tracer_level, 1u);
  EXPECT_EQ(spec.session_id, "tb_session");
}

TEST(RunPod, WritesTheRunAnalysesItAndSummarizesBoth) {
  Pod pod;
  pod.add({.host_name = "host0"});
  pod.add({.host_name = "host1", .clock_offset_ns = 4'000'000});
  const testing::ScratchDirectory scratch("pod_run_analysed");
  const auto run_dir = scratch.path() / "run";
  std::vector<std::string> progress;
  auto outcome = run_pod(pod.members, quick_spec("pod_run"), run_dir, Clock(),
                         [&](const std::string& line) { progress.push_back(line); });
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code(), 0);
  EXPECT_EQ(outcome->run_dir, run_dir);
  EXPECT_EQ(outcome->capture.session_id, "pod_run");
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.front(), "Starting to trace for 300 ms. Remaining attempt(s): 2");
  for (const auto& connection : pod.connections) {
    EXPECT_TRUE(std::filesystem::exists(run_dir / (connection->file_stem + ".xplane.pb"))) << connection->file_stem;
  }
  EXPECT_TRUE(std::filesystem::exists(run_dir / "capture.json"));
  EXPECT_TRUE(std::filesystem::exists(run_dir / "pod.trace.json.gz"));
  ASSERT_TRUE(std::filesystem::exists(run_dir / "pod_summary.txt")) << "the analysis writes beside the host files";
  EXPECT_TRUE(outcome->analysis_error.empty()) << outcome->analysis_error;
  ASSERT_TRUE(outcome->capture.analyzed_in_ms.has_value());
  EXPECT_NE(read_file(run_dir / "capture.json")
                .find("\"analyzed_in_ms\": " + std::to_string(*outcome->capture.analyzed_in_ms)),
            std::string::npos)
      << "capture.json records the analysis time";
  EXPECT_NE(outcome->summary_text.find("(host0): ok"), std::string::npos) << outcome->summary_text;
  EXPECT_NE(outcome->summary_text.find("2 of 2 host(s) captured"), std::string::npos) << outcome->summary_text;
  EXPECT_NE(outcome->summary_text.find(read_file(run_dir / "pod_summary.txt")), std::string::npos)
      << "the analysis summary follows the capture summary";
}

// The analysis' outputs: what a run directory holds beyond the capture's own files and the hosts' databases (each
// whole and tied to its host file, so it passes for nothing but that host's analysis).
bool is_analysis_output(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  return !name.ends_with(".xplane.pb") && !name.ends_with(".host_analysis.pb") && name != "capture.json" &&
         !name.starts_with("pod.");
}

// What a file takes on a tmpfs: whole pages.
uintmax_t pages_of(uintmax_t bytes) { return (bytes + 4095) / 4096 * 4096; }

// Where no tmpfs can be mounted: writes past `bytes` fail while it lives (SIGXFSZ ignored), as on a full disk
// (EFBIG instead of ENOSPC).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    saved_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{bytes, saved_.rlim_max};
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::signal(SIGXFSZ, saved_handler_);
  }

 private:
  rlimit saved_{};
  sighandler_t saved_handler_ = SIG_DFL;
};

// What a failed run must leave: nothing when the capture's own files could not all be written; else those files,
// whole, and not one analysis output (a few of them would pass for a whole analysis); never a temporary file.
void expect_no_output_that_looks_whole(const absl::StatusOr<PodRunOutcome>& outcome,
                                       const std::filesystem::path& run_dir, const std::string& why) {
  if (!outcome.ok()) {
    EXPECT_NE(std::string(outcome.status().message()).find(why), std::string::npos) << outcome.status();
    EXPECT_NE(std::string(outcome.status().message()).find("was removed"), std::string::npos) << outcome.status();
    EXPECT_FALSE(std::filesystem::exists(run_dir)) << "a run lacking files would pass for a smaller whole one";
    return;
  }
  EXPECT_EQ(outcome->exit_code(), 1) << outcome->summary_text;
  EXPECT_TRUE(outcome->analysis_outputs_lost);
  EXPECT_NE(outcome->summary_text.find("Error: pod analysis failed: the analysis outputs could not be written"),
            std::string::npos)
      << outcome->summary_text;
  EXPECT_NE(outcome->summary_text.find(why), std::string::npos) << outcome->summary_text;
  EXPECT_TRUE(std::filesystem::exists(run_dir / "capture.json"));
  for (const auto& entry : std::filesystem::directory_iterator(run_dir)) {
    EXPECT_FALSE(is_analysis_output(entry.path())) << entry.path() << " stayed beside missing outputs";
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
  }
}

// A disk that fills while the run is written (in the capture's files, then in the analysis outputs): the run fails
// naming why, and leaves nothing that passes for a whole run or a whole analysis.
TEST(RunPod, AFullDiskFailsTheRunNamingWhyAndLeavesNoOutputThatLooksWhole) {
  Pod pod;
  pod.add({.host_name = "host0"});
  pod.add({.host_name = "host1"});
  // One run with room to spare says what the capture's files and the analysis' outputs take.
  const testing::ScratchDirectory sizing_scratch("pod_run_sizing");
  const auto sizing_dir = sizing_scratch.path() / "run";
  auto sized = run_pod(pod.members, quick_spec("sizing"), sizing_dir, Clock(), [](const std::string&) {});
  ASSERT_TRUE(sized.ok()) << sized.status();
  ASSERT_EQ(sized->exit_code(), 0) << sized->summary_text;
  uintmax_t capture_bytes = 0, analysis_bytes = 0, largest_capture_file = 0, largest_output = 0;
  for (const auto& entry : std::filesystem::directory_iterator(sizing_dir)) {
    const uintmax_t size = entry.file_size();
    (is_analysis_output(entry.path()) ? analysis_bytes : capture_bytes) += pages_of(size);
    uintmax_t& largest = is_analysis_output(entry.path()) ? largest_output : largest_capture_file;
    largest = std::max(largest, size);
  }

  testing::SmallDisk disk("pod_run_full_disk");
  const auto run_dir = disk.dir() / "logdir" / "run";
  if (disk.mounted()) {
    const struct {
      const char* where;
      uintmax_t room;
    } cases[] = {{"the capture's files", capture_bytes / 2},
                 {"the analysis outputs", capture_bytes + analysis_bytes / 2}};
    for (const auto& c : cases) {
      SCOPED_TRACE(std::string("the disk fills in ") + c.where);
      disk.leave_room(c.room);
      auto outcome = run_pod(pod.members, quick_spec("full"), run_dir, Clock(), [](const std::string&) {});
      expect_no_output_that_looks_whole(outcome, run_dir, "No space left on device");
      if (c.room < capture_bytes) {
        EXPECT_FALSE(outcome.ok()) << "the capture's files did not fit";
      }
      std::filesystem::remove_all(run_dir);
    }
    return;
  }
  std::cout << "cannot mount a tmpfs here (needs root): the disk fills through the file-size limit instead\n";
  {
    FileSizeLimit limit(largest_capture_file / 2);
    auto outcome = run_pod(pod.members, quick_spec("too_large"), run_dir, Clock(), [](const std::string&) {});
    expect_no_output_that_looks_whole(outcome, run_dir, "File too large");
    EXPECT_FALSE(outcome.ok());
  }
  std::filesystem::remove_all(run_dir);
  if (largest_output <= largest_capture_file + 4096) {
    GTEST_SKIP() << "no analysis output is larger than every capture file here: the file-size limit cannot fail the "
                    "analysis alone (a mounted tmpfs can)";
  }
  FileSizeLimit limit((largest_capture_file + largest_output) / 2);
  auto outcome = run_pod(pod.members, quick_spec("too_large"), run_dir, Clock(), [](const std::string&) {});
  expect_no_output_that_looks_whole(outcome, run_dir, "File too large");
  EXPECT_TRUE(outcome.ok()) << outcome.status();
}

TEST(RunPod, WhatTheCallerKnowsOfAWorkerGoesIntoItsFile) {
  Pod pod;
  pod.add({.host_name = ""}, "registered-name", 1.5);  // an agent whose XSpace names no host
  const testing::ScratchDirectory scratch("pod_run_known");
  const auto run_dir = scratch.path() / "run";
  auto outcome = run_pod(pod.members, quick_spec("known"), run_dir, Clock(), [](const std::string&) {});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(outcome->capture.hosts.size(), 1u);
  EXPECT_EQ(outcome->capture.hosts[0].host_name, "registered-name");
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(read_file(run_dir / (pod.connections[0]->file_stem + ".xplane.pb"))));
  const xspace::XPlaneReader host(*xspace::find_plane(space, xspace::kHostPlaneName));
  EXPECT_DOUBLE_EQ(host.double_stat(xspace::kClockDriftStat).value(), 1.5);
}

TEST(RunPod, NothingCapturedIsRecordedButNotAnalysed) {
  Pod pod;
  pod.add({.host_name = "idle", .empty_trace = true});
  const testing::ScratchDirectory scratch("pod_run_empty");
  const auto run_dir = scratch.path() / "run";
  CaptureSpec spec = quick_spec("empty");
  spec.num_tracing_attempts = 1;
  auto outcome = run_pod(pod.members, spec, run_dir, Clock(), [](const std::string&) {});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->exit_code(), 1);
  EXPECT_TRUE(std::filesystem::exists(run_dir / "capture.json"));
  EXPECT_FALSE(std::filesystem::exists(run_dir / "pod_summary.txt"));
  EXPECT_TRUE(outcome->analysis_error.empty());
  EXPECT_NE(outcome->summary_text.find("FAILED: no trace event was collected"), std::string::npos)
      << outcome->summary_text;
}

TEST(RunPod, TwoRunsOfTheSameNameNeverShareADirectory) {
  Pod pod;
  pod.add({.host_name = "host0"});
  const testing::ScratchDirectory scratch("pod_run_same_second");
  const auto& logdir = scratch.path();
  const auto wanted = logdir / "2026_11_22_10_00_00";
  auto first = run_pod(pod.members, quick_spec("2026_11_22_10_00_00"), wanted, Clock(), [](const std::string&) {});
  auto second = run_pod(pod.members, quick_spec("2026_11_22_10_00_00"), wanted, Clock(), [](const std::string&) {});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->run_dir, wanted);
  EXPECT_EQ(second->run_dir, logdir / "2026_11_22_10_00_00_1");
  EXPECT_TRUE(std::filesystem::exists(first->run_dir / "capture.json"));
  EXPECT_TRUE(std::filesystem::exists(second->run_dir / "capture.json"));
}

TEST(RunPod, ARunDirectoryThatCannotBeCreatedIsAnErrorNamingIt) {
  Pod pod;
  pod.add({.host_name = "host0"});
  const testing::ScratchDirectory scratch("pod_run_blocked");
  const auto parent = scratch.path() / "parent";
  std::ofstream(parent.string()) << "a file where the run's parent should be";
  auto outcome = run_pod(pod.members, quick_spec("blocked"), parent / "run", Clock(), [](const std::string&) {});
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(std::string(outcome.status().message()).find((parent / "run").string()), std::string::npos)
      << outcome.status();
}

}  // namespace
}  // namespace podscope::pod_capture
