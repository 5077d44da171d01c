// The Python module (client/python/podscope.py, ctypes over the C ABI of the built libpodscope.so),
// run by Debian's python3 against the real local-socket server: registration, steps outside captures,
// and a capture with steps, compute, all-reduce, send and recv-done carrying their stats, and input stages
// nested in a batch stage (parents given as a span or as its id) on the Input Pipeline line, and a block
// allocated and freed every step as TensorFlow's allocator events on the host plane.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "tests/client/mini_agent.h"
#include "tests/sanitized.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope {
namespace {

using namespace std::chrono_literals;
using testing::MiniAgent;

TEST(PythonClient, AnnotatesStepsCollectivesAndChannels) {
#ifdef PODSCOPE_SANITIZED
  GTEST_SKIP() << "an instrumented libpodscope.so needs the sanitizer runtime, which the python3 interpreter lacks";
#endif
  testing::ScratchDirectory dir;
  MiniAgent agent(dir.file("agent.sock"));
  agent.start();
  const std::string stop_file = dir.file("stop");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("PYTHONPATH", PODSCOPE_SOURCE_DIR "/client/python", 1);
    ::setenv("PODSCOPE_LIBRARY", PODSCOPE_BINARY_DIR "/lib/libpodscope.so", 1);
    ::setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
    const std::string sock = dir.file("agent.sock");
    ::execlp("python3", "python3", PODSCOPE_SOURCE_DIR "/tests/client/python_trainer.py", sock.c_str(),
             stop_file.c_str(), nullptr);
    ::_exit(127);
  }
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (::waitpid(pid, nullptr, WNOHANG) == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } reaper{pid};

  ASSERT_TRUE(testing::wait_for([&] { return agent.registry().clients().size() == 1; }, 10s));
  EXPECT_EQ(agent.registry().clients()[0].job, "python-job");
  ASSERT_TRUE(testing::wait_for([&] { return agent.steps_of(pid).size() >= 5; }, 5s));
  EXPECT_GE(agent.steps_of(pid)[0].infeed_ns, 900'000);

  const auto space = agent.capture(400ms);
  std::ofstream(stop_file).close();
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  const auto* plane = xspace::find_plane(space, "/device:CUSTOM:11");
  ASSERT_NE(plane, nullptr);
  xspace::XPlaneReader reader(*plane);
  std::vector<int64_t> steps;
  std::map<std::string, int> count;
  std::map<int64_t, int64_t> batch_ids;                   // batch stage id → step
  std::vector<std::pair<std::string, int64_t>> children;  // name, parent id
  for (const auto& line : plane->lines()) {
    reader.for_each_event(line, [&](const xspace::XEventView& e) {
      if (line.name() == xspace::kStepsLineName) {
        steps.push_back(*e.int_stat(xspace::kStepNumStat));
        return;
      }
      if (line.name() == xspace::kInputPipelineLineName) {
        const std::string name(e.name());
        const int64_t parent = e.int_stat(xspace::kInputStageParentIdStat).value_or(-1);
        EXPECT_TRUE(e.int_stat(xspace::kStepNumStat)) << name;
        if (name == "py_batch") {
          EXPECT_EQ(e.str_stat(xspace::kInputStageCategoryStat), "preprocess");
          EXPECT_EQ(parent, 0);
          batch_ids[e.int_stat(xspace::kInputStageIdStat).value_or(0)] = e.int_stat(xspace::kStepNumStat).value_or(-1);
        } else {
          EXPECT_EQ(e.str_stat(xspace::kInputStageCategoryStat), name == "py_read" ? "read" : "enqueue") << name;
          if (name == "py_read") {
            EXPECT_GE(e.duration_ns(), 900'000);
          }
          children.emplace_back(name, parent);
        }
        return;
      }
      const std::string name(e.name());
      ++count[name];
      EXPECT_TRUE(e.int_stat(xspace::kStepNumStat)) << name;
      if (name == "all-reduce") {
        EXPECT_EQ(e.str_stat(xspace::kReplicaGroupStat), "{11,12}");
        EXPECT_EQ(e.int_stat(xspace::kAllReduceIdStat), e.int_stat(xspace::kStepNumStat));
      }
      if (name == "send") {
        EXPECT_EQ(e.int_stat(xspace::kChannelIdStat), 3);
        EXPECT_EQ(e.int_stat(xspace::kDstCoreStat), 12);
        EXPECT_EQ(e.int_stat(xspace::kBytesStat), 4096);
      }
      if (name == "recv-done") {
        EXPECT_EQ(e.int_stat(xspace::kSrcCoreStat), 12);
      }
      if (name == "py_matmul") {
        EXPECT_EQ(e.int_stat(xspace::kFlopsStat), 1000);
      }
    });
  }
  ASSERT_GE(steps.size(), 10u);
  for (size_t i = 1; i < steps.size(); ++i) EXPECT_EQ(steps[i], steps[i - 1] + 1);
  EXPECT_GE(count["send"], 10);
  EXPECT_GE(count["recv-done"], 10);
  EXPECT_GE(count["all-reduce"], 10);
  EXPECT_GE(count["py_matmul"], 10);
  EXPECT_GE(count["infeed"], 10);
  EXPECT_GE(batch_ids.size(), 10u);
  std::map<std::string, int> nested;
  for (const auto& [name, parent] : children) nested[name] += batch_ids.count(parent) ? 1 : 0;
  EXPECT_GE(nested["py_read"], 10);
  EXPECT_GE(nested["py_collate"], 10);

  // One 1000-byte block of "py_pool" live inside each step: the running total is 1000 after each allocation and 0
  // after each free (a free of a block allocated before the capture is not subtracted).
  const auto* host = xspace::find_plane(space, xspace::kHostPlaneName);
  ASSERT_NE(host, nullptr);
  xspace::XPlaneReader host_reader(*host);
  std::map<std::string, int> memory_events;
  for (const auto& line : host->lines()) {
    bool allocated_in_capture = false;
    host_reader.for_each_event(line, [&](const xspace::XEventView& e) {
      const std::string name(e.name());
      if (name != xspace::kMemoryAllocationEventName && name != xspace::kMemoryDeallocationEventName) return;
      ++memory_events[name];
      EXPECT_EQ(line.name().rfind(xspace::kMemoryAllocationsLinePrefix, 0), 0u) << line.name();
      EXPECT_EQ(e.str_stat(xspace::kAllocatorNameStat), "py_pool");
      // A capture that starts between an allocation and its free sees that free first, before any peak.
      allocated_in_capture = allocated_in_capture || name == xspace::kMemoryAllocationEventName;
      EXPECT_EQ(e.int_stat(xspace::kPeakBytesInUseStat), allocated_in_capture ? 1000 : 0);
      EXPECT_EQ(e.int_stat(xspace::kBytesReservedStat), 0);
      if (name == xspace::kMemoryAllocationEventName) {
        EXPECT_EQ(e.int_stat(xspace::kBytesAllocatedStat), 1000);
        EXPECT_EQ(e.int_stat(xspace::kRequestedBytesStat), 1000);
        EXPECT_EQ(e.str_stat(xspace::kTfOpStat), "py_batch_buffer");
        EXPECT_EQ(e.int_stat(xspace::kAddressStat).value_or(0) % 64, 0);
      } else {
        EXPECT_EQ(e.int_stat(xspace::kBytesAllocatedStat), 0);
      }
    });
  }
  EXPECT_GE(memory_events[std::string(xspace::kMemoryAllocationEventName)], 10);
  EXPECT_GE(memory_events[std::string(xspace::kMemoryDeallocationEventName)], 10);
}

}  // namespace
}  // namespace podscope
