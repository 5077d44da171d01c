// Every byte a capture holds is charged to its budget, whatever its source, for real. A capture under a flood of
// annotations: a podscope-agent with a small capture_memory_limit_mb and several annotation_flood processes
// annotating as fast as they can. The agent's resident memory grows by at most its budget over the whole capture
// (holding, XSpace build, response) and comes back once the answer is sent, Profile answers within duration + 15 s,
// and what the budget dropped is counted per core on the planes, in the warnings and in /metrics. A framework
// profiler server that a local process announced and that answers 400 MiB: refused aloud, within the limit.

#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/grpcpp.h>

#include "client/podscope.h"
#include "podscope/v1/agent.grpc.pb.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"
#include "tests/integration/agent_process.h"
#include "tests/integration/flood_process.h"
#include "tests/sanitized.h"

namespace podscope {
namespace {

using namespace std::chrono_literals;
using testing::AgentProcess;
using testing::FloodProcess;

double metric(const std::string& body, const std::string& name) {
  const size_t at = body.find("\n" + name + "{");
  if (at == std::string::npos) return -1;
  const size_t value = body.find("} ", at) + 2;
  return std::stod(body.substr(value, body.find('\n', value) - value));
}

TEST(CaptureMemory, AFloodOfAnnotationsStaysInsideTheBudgetAndDropsOnlyWholeSteps) {
#ifdef PODSCOPE_SANITIZED
  GTEST_SKIP() << "measures the agent's peak RSS, which ASan's shadow memory and quarantine inflate";
#endif
  constexpr int64_t kLimitMib = 32, kDurationMs = 3000;
  AgentProcess agent({"--capture_memory_limit_mb", std::to_string(kLimitMib)});
  const std::string socket = agent.socket_dir() + "/agent.sock";
  std::vector<std::unique_ptr<FloodProcess>> floods;
  for (int core = 0; core < 4; ++core) floods.push_back(std::make_unique<FloodProcess>(socket, core, 2, 9));
  const auto deadline = std::chrono::steady_clock::now() + 30s;  // niced processes on a busy box start slowly
  while (testing::registered_clients(agent) < 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  ASSERT_EQ(testing::registered_clients(agent), 4);

  tensorflow::ProfileResponse warm_up;  // the first capture also sets up what every capture reuses
  ASSERT_TRUE(testing::profile_xspace(agent, 200, warm_up).ok());
  warm_up.Clear();
  testing::reset_peak_rss(agent.pid());
  const int64_t rss_before_kib = testing::status_kib(agent.pid(), "VmRSS");

  tensorflow::ProfileResponse response;
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = testing::profile_xspace(agent, kDurationMs, response);
  const auto took = std::chrono::steady_clock::now() - start;
  const int64_t growth_kib = testing::status_kib(agent.pid(), "VmHWM") - rss_before_kib;
  ASSERT_TRUE(status.ok()) << status.error_message();
  floods.clear();
  for (int i = 0; i < 50; ++i) agent.read_some(10);
  // And the memory comes back once the answer is sent: the agent hands the freed heap back (glibc would keep the
  // capture's peak). Measured 0-10 MiB kept on a box loaded 10-30 deep (the clients' traffic goes on after the
  // trim), where an agent that did not hand it back kept 15; at the default 256 MiB, 5-7 MiB against 224-237
  // (capture_memory_bench).
  int64_t kept_kib = 0;
  for (const auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(500ms);
    kept_kib = testing::status_kib(agent.pid(), "VmRSS") - rss_before_kib;
    if (kept_kib <= kLimitMib * 1024 / 2) break;
  }
  EXPECT_LE(kept_kib, kLimitMib * 1024 / 2) << "the agent kept " << kept_kib / 1024 << " MiB after answering";

  // The budget covers what the capture holds, builds and answers: the planes are written as they are built and gRPC
  // sends those bytes without a copy.
  const int64_t answer_kib = static_cast<int64_t>(response.ByteSizeLong() / 1024);
  EXPECT_LE(growth_kib, kLimitMib * 1024) << "the agent grew by " << growth_kib / 1024
                                          << " MiB during the capture, its answer " << answer_kib / 1024 << " MiB";
  EXPECT_LT(took, std::chrono::milliseconds(kDurationMs) + 15s);

  // Every core's plane counts what was dropped there (that only whole steps go: compact_event_store_test).
  uint64_t kept_events = 0, dropped_events = 0, dropped_steps = 0;
  for (int core = 0; core < 4; ++core) {
    const auto* plane = xspace::find_plane(response.xspace(), "/device:CUSTOM:" + std::to_string(core));
    ASSERT_NE(plane, nullptr) << "core " << core;
    xspace::XPlaneReader reader(*plane);
    if (auto d = reader.int_stat(xspace::kDroppedEventsStat)) dropped_events += static_cast<uint64_t>(*d);
    if (auto d = reader.int_stat(xspace::kDroppedStepsStat)) dropped_steps += static_cast<uint64_t>(*d);
    for (const auto& line : plane->lines()) kept_events += static_cast<uint64_t>(line.events_size());
  }
  EXPECT_GT(dropped_events, 0u) << "the flood must overflow a " << kLimitMib << " MiB budget";
  EXPECT_GT(dropped_steps, 0u);
  bool warned = false;
  for (const auto& w : response.xspace().warnings()) warned |= w.find("capture_memory_limit_mb") != std::string::npos;
  EXPECT_TRUE(warned);
  const std::string metrics = testing::http_get(agent.metrics_port(), "/metrics");
  EXPECT_GE(metric(metrics, "podscope_capture_budget_dropped_events_total"), static_cast<double>(dropped_events));
  EXPECT_GE(metric(metrics, "podscope_capture_budget_dropped_steps_total"), static_cast<double>(dropped_steps));
  std::printf(
      "capture of %lld ms, limit %lld MiB: RSS growth %lld MiB, %lld MiB kept after the answer of %lld MiB, "
      "answered in %lld ms, %llu events kept, %llu dropped in %llu steps\n",
      static_cast<long long>(kDurationMs), static_cast<long long>(kLimitMib), static_cast<long long>(growth_kib / 1024),
      static_cast<long long>(kept_kib / 1024), static_cast<long long>(answer_kib / 1024),
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
      static_cast<unsigned long long>(kept_events), static_cast<unsigned long long>(dropped_events),
      static_cast<unsigned long long>(dropped_steps));
  for (size_t at = agent.output().find("local clients:"); at != std::string::npos;
       at = agent.output().find("local clients:", at + 1)) {
    std::printf("agent: %s\n", agent.output().substr(at, agent.output().find('\n', at) - at).c_str());
  }
}

// The wire bytes of a field: its tag, then its length and `bytes` (length-delimited, wire type 2).
void append_field(int number, std::string_view bytes, std::string& out) {
  google::protobuf::io::StringOutputStream sink(&out);
  google::protobuf::io::CodedOutputStream wire(&sink);
  wire.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
      number, google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
  wire.WriteVarint64(bytes.size());
  wire.WriteRaw(bytes.data(), static_cast<int>(bytes.size()));
}

// A ProfileResponse of `mib` MiB: one XSpace plane of lines of a million small events each, written as bytes (as
// objects it would take gigabytes in this process too).
std::string profile_answer_of(int64_t mib) {
  tensorflow::profiler::XLine line;
  line.set_name("ops");
  for (int i = 0; i < 1'000'000; ++i) {
    auto* event = line.add_events();
    event->set_metadata_id(1);
    event->set_offset_ps(i * 1000);
    event->set_duration_ps(500);
  }
  const std::string line_bytes = line.SerializeAsString();
  std::string plane;
  append_field(2, "/host:CPU", plane);
  while (plane.size() < static_cast<size_t>(mib) << 20) append_field(3, line_bytes, plane);
  std::string space, response;
  append_field(1, plane, space);
  std::string().swap(plane);
  append_field(8, space, response);
  return response;
}

// A framework profiler server that answers every Profile with the same bytes, as an attacker's would.
class AnsweringProfilerServer {
 public:
  explicit AnsweringProfilerServer(std::string answer) : answer_(std::move(answer)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.SetMaxSendMessageSize(INT_MAX);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~AnsweringProfilerServer() { server_->Shutdown(); }
  uint16_t port() const { return static_cast<uint16_t>(port_); }

 private:
  class Service final
      : public tensorflow::ProfilerService::WithRawCallbackMethod_Profile<tensorflow::ProfilerService::Service> {
   public:
    explicit Service(const std::string& answer) : answer_(answer) {}
    grpc::ServerUnaryReactor* Profile(grpc::CallbackServerContext* context, const grpc::ByteBuffer*,
                                      grpc::ByteBuffer* response) override {
      grpc::Slice slice(answer_.data(), answer_.size(), grpc::Slice::STATIC_SLICE);
      *response = grpc::ByteBuffer(&slice, 1);
      auto* reactor = context->DefaultReactor();
      reactor->Finish(grpc::Status::OK);
      return reactor;
    }

   private:
    const std::string& answer_;
  };
  const std::string answer_;
  Service service_{answer_};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST(CaptureMemory, AnAnnouncedProfilerServerAnsweringFourHundredMibIsRefusedWithinTheLimit) {
#ifdef PODSCOPE_SANITIZED
  GTEST_SKIP() << "measures the agent's peak RSS, which ASan's shadow memory and quarantine inflate";
#endif
  // Before, the agent took such an answer whole (gRPC accepted up to 1 GiB), copied it and parsed it: 1.20 GB
  // resident at the default capture_memory_limit_mb of 256. Now the one server's answers get half of it.
  constexpr int64_t kLimitMib = 256, kAnswerMib = 400;
  AnsweringProfilerServer server(profile_answer_of(kAnswerMib));
  AgentProcess agent({"--capture_memory_limit_mb", std::to_string(kLimitMib)});
  // This process announces the server, as a training process that started it does.
  podscope::Options options;
  options.socket_path = agent.socket_dir() + "/agent.sock";
  podscope::init(options);
  podscope::announce_profiler(server.port());
  const auto announced = [&agent] {
    const std::optional<podscope::v1::AgentStatus> status = testing::try_agent_status(agent);
    return status && status->clients_size() == 1 && status->clients(0).profiler_port() != 0;
  };
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!announced() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(announced()) << agent.output();

  testing::reset_peak_rss(agent.pid());
  const int64_t rss_before_kib = testing::status_kib(agent.pid(), "VmRSS");
  tensorflow::ProfileResponse response;
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = testing::profile_xspace(agent, 1000, response);
  const auto took = std::chrono::steady_clock::now() - start;
  const int64_t growth_kib = testing::status_kib(agent.pid(), "VmHWM") - rss_before_kib;
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::string who = "upstream profiler 127.0.0.1:" + std::to_string(server.port()) + ": dropped";
  std::string warning;
  for (const auto& w : response.xspace().warnings()) {
    if (w.find(who) != std::string::npos) warning = w;
  }
  std::printf(
      "an announced server answering %lld MiB, capture_memory_limit_mb %lld: the agent grew by %lld MiB, "
      "answered in %lld ms; \"%s\"\n",
      static_cast<long long>(kAnswerMib), static_cast<long long>(kLimitMib), static_cast<long long>(growth_kib / 1024),
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()), warning.c_str());
  EXPECT_NE(warning.find("capture_memory_limit_mb=256"), std::string::npos) << warning;
  EXPECT_LE(growth_kib, kLimitMib * 1024) << "the agent grew by " << growth_kib / 1024 << " MiB";
  const std::string metrics = testing::http_get(agent.metrics_port(), "/metrics");
  EXPECT_NE(metrics.find("podscope_capture_inputs_refused_total{host="), std::string::npos);
  EXPECT_NE(metrics.find("source=\"upstream\"} 1"), std::string::npos) << metrics;
  podscope::shutdown();
}

}  // namespace
}  // namespace podscope
