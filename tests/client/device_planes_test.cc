// Device planes from a tracer inside the client (libpodscope's CaptureWindowListener, as libpodscope_cupti
// uses it) through the real local socket into the agent's capture, including planes whose names are not
// valid UTF-8: they are repaired, not dropped.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "client/podscope.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/client/mini_agent.h"

namespace podscope {
namespace {

using namespace std::chrono_literals;
using testing::MiniAgent;

const std::string kFffd = "\xEF\xBF\xBD";

// Sends, at each window's close, whatever the test set last. Registered once: listeners live as long as the process.
class DeviceTracer final : public CaptureWindowListener {
 public:
  void window_opened() override {}
  std::string window_closed() override {
    std::lock_guard lock(mu_);
    return space_bytes_;
  }
  void set(std::string space_bytes) {
    std::lock_guard lock(mu_);
    space_bytes_ = std::move(space_bytes);
  }

 private:
  std::mutex mu_;
  std::string space_bytes_;
};

DeviceTracer& tracer() {
  static DeviceTracer* t = [] {
    auto* t = new DeviceTracer;
    add_capture_window_listener(t);
    return t;
  }();
  return *t;
}

// A GPU plane as a CUPTI tracer writes it: a stream line with one kernel. `marker` goes into the plane, line and
// kernel names and the kernel's string stat.
tensorflow::profiler::XSpace kernel_space(const std::string& marker) {
  tensorflow::profiler::XSpace space;
  auto* plane = space.add_planes();
  plane->set_id(1);
  plane->set_name("/device:GPU:0" + marker);
  auto* line = plane->add_lines();
  line->set_id(7);
  line->set_name("Stream #7" + marker);
  line->set_timestamp_ns(1'700'000'000'000'000'000);
  auto& metadata = (*plane->mutable_event_metadata())[1];
  metadata.set_id(1);
  metadata.set_name("gemm_kernel" + marker);
  auto& stat_metadata = (*plane->mutable_stat_metadata())[2];
  stat_metadata.set_id(2);
  stat_metadata.set_name("correlation");
  auto* event = line->add_events();
  event->set_metadata_id(1);
  event->set_offset_ps(1'000'000);
  event->set_duration_ps(2'000'000);
  auto* stat = event->add_stats();
  stat->set_metadata_id(2);
  stat->set_str_value("launch" + marker);
  return space;
}

class DevicePlanesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agent_.start();
    Options o;
    o.cores = {0};
    o.job = "unit";
    o.socket_path = dir_.file("agent.sock");
    init(o);
    tracer();
    ASSERT_TRUE(testing::wait_for([&] { return agent_.registry().clients().size() == 1; }, 3s));
  }
  void TearDown() override {
    tracer().set("");
    shutdown();
  }

  const tensorflow::profiler::XPlane* gpu_plane(const tensorflow::profiler::XSpace& space, const std::string& name) {
    for (const auto& plane : space.planes()) {
      if (plane.name() == name) return &plane;
    }
    ADD_FAILURE() << "no plane " << name << " in\n" << space.DebugString();
    return nullptr;
  }

  testing::ScratchDirectory dir_;
  MiniAgent agent_{dir_.file("agent.sock")};
};

TEST_F(DevicePlanesTest, AClientTracersPlanesAreMergedIntoTheCapture) {
  tracer().set(kernel_space("").SerializeAsString());
  const auto space = agent_.capture(200ms);
  EXPECT_TRUE(space.warnings().empty()) << ::testing::PrintToString(space.warnings());
  const auto* gpu = gpu_plane(space, "/device:GPU:0");
  ASSERT_NE(gpu, nullptr);
  ASSERT_EQ(gpu->lines_size(), 1);
  EXPECT_EQ(gpu->lines(0).name(), "Stream #7");
  EXPECT_EQ(gpu->lines(0).events_size(), 1);
}

TEST_F(DevicePlanesTest, PlanesWithInvalidUtf8AreRepairedNotDropped) {
  // Written valid with a marker, then the marker overwritten in the bytes by an invalid byte of the same length,
  // as a tracer that copies driver-given names unchecked would send them.
  std::string bytes = kernel_space("?").SerializeAsString();
  ASSERT_EQ(std::count(bytes.begin(), bytes.end(), '?'), 4) << "the marker appears only in the four strings";
  for (char& c : bytes) {
    if (c == '?') c = '\xFF';
  }
  tracer().set(bytes);
  const auto space = agent_.capture(200ms);

  ASSERT_EQ(space.warnings_size(), 1) << ::testing::PrintToString(space.warnings());
  EXPECT_NE(space.warnings(0).find("local client pid " + std::to_string(::getpid())), std::string::npos)
      << space.warnings(0);
  EXPECT_NE(space.warnings(0).find("device planes: 4 strings held invalid UTF-8; invalid sequences replaced by U+FFFD"),
            std::string::npos)
      << space.warnings(0);
  const auto* gpu = gpu_plane(space, "/device:GPU:0" + kFffd);
  ASSERT_NE(gpu, nullptr);
  ASSERT_EQ(gpu->lines_size(), 1);
  EXPECT_EQ(gpu->lines(0).name(), "Stream #7" + kFffd);
  ASSERT_EQ(gpu->lines(0).events_size(), 1);
  const auto& kernel = gpu->lines(0).events(0);
  EXPECT_EQ(gpu->event_metadata().at(kernel.metadata_id()).name(), "gemm_kernel" + kFffd);
  ASSERT_EQ(kernel.stats_size(), 1);
  EXPECT_EQ(kernel.stats(0).str_value(), "launch" + kFffd);

  tensorflow::profiler::XSpace strict;
  EXPECT_TRUE(strict.ParseFromString(space.SerializeAsString())) << "the capture parses for strict readers";
}

}  // namespace
}  // namespace podscope
