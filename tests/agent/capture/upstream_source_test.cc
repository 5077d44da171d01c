// UpstreamSource against stand-in framework profiler servers that speak tensorflow.ProfilerService and
// return the real TensorFlow XSpace from ../shared/testdata (tests/shared_testdata.h).
#include "agent/capture/upstream_source.h"

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tensorflow/profiler_service.grpc.pb.h"
#include "tests/loopback_grpc_server.h"
#include "tests/proto/xspace/xspace_contents.h"
#include "tests/shared_testdata.h"

namespace podscope::agent {
namespace {

using podscope::testing::event_count;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using ::testing::HasSubstr;

// A TF/JAX profiler server: traces for the requested duration (or until Terminate) and answers with the
// recorded XSpace, inline (`xspace`, newer servers) or as tool data "xplane.pb" (older ones).
class StandInProfilerService final : public tensorflow::ProfilerService::Service {
 public:
  enum class Answer { kXSpaceField, kToolData };
  StandInProfilerService(Answer answer, XSpace space) : answer_(answer), space_(std::move(space)) {}

  grpc::Status Profile(grpc::ServerContext*, const tensorflow::ProfileRequest* request,
                       tensorflow::ProfileResponse* response) override {
    std::unique_lock lock(mu_);
    received_ = *request;
    ++profiles_;
    cv_.wait_for(lock, std::chrono::milliseconds(request->duration_ms()), [&] { return terminated_; });
    if (answer_ == Answer::kXSpaceField) {
      *response->mutable_xspace() = space_;
    } else {
      auto* tool = response->add_tool_data();
      tool->set_name("host0.xplane.pb");
      space_.SerializeToString(tool->mutable_data());
    }
    return grpc::Status::OK;
  }
  grpc::Status Terminate(grpc::ServerContext*, const tensorflow::TerminateRequest* request,
                         tensorflow::TerminateResponse*) override {
    std::lock_guard lock(mu_);
    terminated_session_ = request->session_id();
    terminated_ = true;
    cv_.notify_all();
    return grpc::Status::OK;
  }
  tensorflow::ProfileRequest received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  std::string terminated_session() {
    std::lock_guard lock(mu_);
    return terminated_session_;
  }
  const XSpace& space() const { return space_; }

 private:
  const Answer answer_;
  const XSpace space_;
  std::mutex mu_;
  std::condition_variable cv_;
  tensorflow::ProfileRequest received_;
  int profiles_ = 0;
  bool terminated_ = false;
  std::string terminated_session_;
};

class StandInUpstream {
 public:
  StandInUpstream(StandInProfilerService::Answer answer, const XSpace& space) : service_(answer, space) {}
  std::string address() const { return server_.address(); }
  StandInProfilerService& service() { return service_; }

 private:
  StandInProfilerService service_;
  podscope::testing::LoopbackGrpcServer server_{service_};
};

const Clock kSystemClock;

CaptureWindow make_window(uint64_t duration_ms) {
  CaptureWindow window;
  window.session_id = "session-7";
  window.start_ns = 1'700'000'000'000'000'000;
  window.planned_end_ns = window.start_ns + duration_ms * 1'000'000;
  window.request.set_duration_ms(duration_ms);
  window.request.set_session_id("session-7");
  window.request.set_host_name("worker-0");
  window.request.mutable_opts()->set_start_timestamp_ns(window.start_ns);
  window.request.mutable_opts()->set_host_tracer_level(2);
  return window;
}

// The agent's own data: a /host:CPU plane with one line of its own.
XSpace agent_space() {
  XSpace space;
  xspace::XPlaneBuilder host(xspace::find_or_add_plane(space, xspace::kHostPlaneName));
  host.line_named("podscope host").add_event("agent-event", 1'700'000'000'000'000'000, 1000);
  return space;
}

// What `source` collects over a whole window of `duration_ms` (opened, then closed at its planned end), on top of the
// agent's own planes in `agent_data`.
XSpace collect_window(UpstreamSource& source, uint64_t duration_ms, XSpace agent_data = {}) {
  const CaptureWindow window = make_window(duration_ms);
  source.open(window);
  source.close(window.planned_end_ns);
  CaptureSpace out("agent-host");
  out.space() = std::move(agent_data);
  source.collect(out);
  return std::move(out.space());
}

// Every stand-in upstream answers with TensorFlow's own XSpace from the shared test data.
class UpstreamSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto tf_file = testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
    if (tf_file) tf_space_ = podscope::testing::read_xspace_file(*tf_file);
  }

  XSpace tf_space_;
};

TEST_F(UpstreamSourceTest, ForwardsTheSameRequestAndMergesEveryUpstreamEvent) {
  StandInUpstream upstream(StandInProfilerService::Answer::kXSpaceField, tf_space_);
  UpstreamSource source({upstream.address()}, kSystemClock);
  const XSpace space = collect_window(source, 50, agent_space());

  const tensorflow::ProfileRequest received = upstream.service().received();
  EXPECT_EQ(received.duration_ms(), 50u);
  EXPECT_EQ(received.opts().start_timestamp_ns(), uint64_t(make_window(50).start_ns));
  EXPECT_EQ(received.session_id(), "session-7");
  EXPECT_EQ(received.opts().host_tracer_level(), 2u);
  EXPECT_TRUE(received.emit_xspace());

  EXPECT_THAT(space.warnings(), ::testing::IsEmpty());
  const XSpace& tf = upstream.service().space();
  // Device planes added whole; /host:CPU lines merged into ours; nothing dropped although the old file's
  // timestamps lie decades before our window.
  for (int gpu = 0; gpu < 8; ++gpu) {
    const std::string name = "/device:GPU:" + std::to_string(gpu);
    EXPECT_EQ(event_count(space, name), event_count(tf, name)) << name;
  }
  EXPECT_EQ(event_count(space, "/host:CPU"), event_count(tf, "/host:CPU") + 1);
  int host_planes = 0;
  for (const auto& plane : space.planes()) host_planes += plane.name() == "/host:CPU";
  EXPECT_EQ(host_planes, 1);
}

TEST_F(UpstreamSourceTest, ReadsOlderServersXPlaneToolData) {
  StandInUpstream upstream(StandInProfilerService::Answer::kToolData, tf_space_);
  UpstreamSource source({upstream.address()}, kSystemClock);
  const XSpace space = collect_window(source, 10);
  EXPECT_THAT(space.warnings(), ::testing::IsEmpty());
  EXPECT_EQ(event_count(space, "/device:GPU:4"), event_count(upstream.service().space(), "/device:GPU:4"));
  EXPECT_GT(event_count(space, "/device:GPU:4"), 1000u);
}

TEST_F(UpstreamSourceTest, UnreachableUpstreamBecomesAWarningAndOthersStillMerge) {
  std::string dead;
  {
    StandInUpstream gone(StandInProfilerService::Answer::kXSpaceField, tf_space_);
    dead = gone.address();
  }
  StandInUpstream alive(StandInProfilerService::Answer::kXSpaceField, tf_space_);
  UpstreamSource source({dead, alive.address()}, kSystemClock);
  const XSpace space = collect_window(source, 10);
  ASSERT_EQ(space.warnings_size(), 1) << ::testing::PrintToString(space.warnings());
  EXPECT_THAT(space.warnings(0), HasSubstr("upstream profiler " + dead + ": Profile failed"));
  EXPECT_GT(event_count(space, "/device:GPU:6"), 1000u);
}

// A profiler server that takes every Profile and never answers, until it is shut down.
class SilentProfilerService final : public tensorflow::ProfilerService::Service {
 public:
  grpc::Status Profile(grpc::ServerContext* context, const tensorflow::ProfileRequest*,
                       tensorflow::ProfileResponse*) override {
    while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return grpc::Status::CANCELLED;
  }
};

TEST_F(UpstreamSourceTest, AServerThatNeverAnswersHoldsAOneSecondCaptureForItsDurationAtMost) {
  // Before, the agent waited 30 s past the window for any server: a 1 s capture took 31 s. Now it waits the window's
  // duration past its end, at least kMinAnswerWait.
  SilentProfilerService silent;
  const podscope::testing::LoopbackGrpcServer server(silent);
  const std::string address = server.address();
  UpstreamSource source({}, kSystemClock, [&address] { return std::vector<std::string>{address}; });
  const CaptureWindow window = make_window(1000);
  const auto opened = std::chrono::steady_clock::now();
  source.open(window);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  source.close(window.planned_end_ns);
  CaptureSpace out("agent-host");
  source.collect(out);
  const auto took = std::chrono::steady_clock::now() - opened;
  std::printf("a 1 s window with a server that never answers: collected %.1f s after it opened\n",
              std::chrono::duration<double>(took).count());
  EXPECT_LT(took, std::chrono::milliseconds(1000) + UpstreamSource::kMinAnswerWait + std::chrono::seconds(3));
  ASSERT_EQ(out.space().warnings_size(), 1);
  EXPECT_THAT(out.space().warnings(0), HasSubstr("upstream profiler " + address + ": Profile failed"));
}

TEST_F(UpstreamSourceTest, EarlyCloseTerminatesTheUpstreamSessionInsteadOfWaitingItOut) {
  StandInUpstream upstream(StandInProfilerService::Answer::kXSpaceField, tf_space_);
  UpstreamSource source({upstream.address()}, kSystemClock);
  const CaptureWindow window = make_window(60'000);
  source.open(window);
  // Wait until the upstream is tracing, then end the window early (Terminate / cancel / shutdown).
  for (int i = 0; i < 200 && upstream.service().received().session_id().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto before = std::chrono::steady_clock::now();
  source.close(window.start_ns + 5'000'000);
  CaptureSpace out("agent-host");
  source.collect(out);
  XSpace& space = out.space();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(5));
  EXPECT_EQ(upstream.service().terminated_session(), "session-7");
  EXPECT_GT(event_count(space, "/device:GPU:4"), 1000u);
}

// What TensorFlow's C++ server sends for names it never validated: a plane, a line, an event name and a string
// stat holding bytes that are not UTF-8 (the stand-in's own serialization logs each, as TensorFlow's would).
XSpace space_with_invalid_utf8() {
  XSpace space;
  auto* plane = space.add_planes();
  plane->set_id(1);
  plane->set_name("/device:GPU:0 \xFF");
  auto* line = plane->add_lines();
  line->set_id(1);
  line->set_name("stream \xC3");
  auto& metadata = (*plane->mutable_event_metadata())[7];
  metadata.set_id(7);
  metadata.set_name("fusion.\xED\xA0\x80");
  auto& stat_metadata = (*plane->mutable_stat_metadata())[8];
  stat_metadata.set_id(8);
  stat_metadata.set_name("hlo_op");
  auto* event = line->add_events();
  event->set_metadata_id(7);
  event->set_offset_ps(1000);
  event->set_duration_ps(5000);
  auto* stat = event->add_stats();
  stat->set_metadata_id(8);
  stat->set_str_value("op\x80");
  return space;
}

// Before, gRPC's own parsing refused such an inline answer whole ("Profile failed") and tool data was dropped as
// "not a valid XSpace"; now every event arrives, its strings repaired, and the repair is reported.
void expect_repaired_and_merged(StandInProfilerService::Answer answer) {
  StandInUpstream upstream(answer, space_with_invalid_utf8());
  UpstreamSource source({upstream.address()}, kSystemClock);
  const XSpace space = collect_window(source, 10, agent_space());

  ASSERT_EQ(space.warnings_size(), 1) << ::testing::PrintToString(space.warnings());
  EXPECT_EQ(space.warnings(0), "upstream profiler " + upstream.address() +
                                   ": 4 strings held invalid UTF-8; invalid sequences replaced by U+FFFD");
  const std::string fffd = "\xEF\xBF\xBD";
  const XPlane* gpu = nullptr;
  for (const auto& plane : space.planes()) {
    if (plane.name() == "/device:GPU:0 " + fffd) gpu = &plane;
  }
  ASSERT_NE(gpu, nullptr) << space.DebugString();
  ASSERT_EQ(gpu->lines_size(), 1);
  EXPECT_EQ(gpu->lines(0).name(), "stream " + fffd);
  ASSERT_EQ(gpu->lines(0).events_size(), 1);
  const auto& event = gpu->lines(0).events(0);
  EXPECT_EQ(gpu->event_metadata().at(event.metadata_id()).name(), "fusion." + fffd + fffd + fffd);
  ASSERT_EQ(event.stats_size(), 1);
  EXPECT_EQ(event.stats(0).str_value(), "op" + fffd);
  EXPECT_EQ(event_count(space, "/host:CPU"), 1u) << "the agent's own events stay";

  XSpace strict;
  EXPECT_TRUE(strict.ParseFromString(space.SerializeAsString())) << "the capture parses for strict readers";
}

// TensorFlow 2.21's and JAX 0.10's servers answer with times relative to their session's start, recorded as
// `profile_start_time` on a "Task Environment" plane: the merged events are back on the epoch, then on the
// agent's clock (here 5 s ahead of the system's).
TEST_F(UpstreamSourceTest, SessionRelativeTimesArePutOnTheAgentsClock) {
  constexpr int64_t kSessionStart = 1'795'000'000'000'000'000;
  constexpr int64_t kAgentOffset = 5'000'000'000;
  XSpace relative;
  xspace::XPlaneBuilder environment(xspace::find_or_add_plane(relative, "Task Environment"));
  environment.stats().add("profile_start_time", kSessionStart);
  xspace::XPlaneBuilder host(xspace::find_or_add_plane(relative, xspace::kHostPlaneName));
  host.line_named("python").add_event("train", 2'000, 1'000);
  StandInUpstream upstream(StandInProfilerService::Answer::kXSpaceField, relative);
  const Clock agent_clock(kAgentOffset);
  UpstreamSource source({upstream.address()}, agent_clock);
  const XSpace space = collect_window(source, 10);

  const XPlane* merged = xspace::find_plane(space, xspace::kHostPlaneName);
  ASSERT_NE(merged, nullptr);
  ASSERT_EQ(merged->lines_size(), 1);
  const auto& line = merged->lines(0);
  ASSERT_EQ(line.events_size(), 1);
  EXPECT_EQ(line.timestamp_ns() + line.events(0).offset_ps() / 1000, kSessionStart + 2'000 + kAgentOffset);
}

TEST_F(UpstreamSourceTest, InvalidUtf8InAnInlineXSpaceIsRepairedNotDropped) {
  expect_repaired_and_merged(StandInProfilerService::Answer::kXSpaceField);
}

TEST_F(UpstreamSourceTest, InvalidUtf8InXPlaneToolDataIsRepairedNotDropped) {
  expect_repaired_and_merged(StandInProfilerService::Answer::kToolData);
}

}  // namespace
}  // namespace podscope::agent
