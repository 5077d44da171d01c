// The device parts through the real podscope-agent binary: the stand-in libnvidia-ml.so.1 found through
// LD_LIBRARY_PATH as the driver's would be, a stand-in libtpu metric server (--tpu_metrics_addr), and a
// stand-in TensorFlow profiler server (--upstream) whose XSpace must come back merged into the agent's capture.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"
#include "tensorflow/profiler_service.grpc.pb.h"
#include "tpu/runtime_metric_service.grpc.pb.h"

namespace {

namespace rt = ::tpu::monitoring::runtime;
using ::testing::HasSubstr;
using tensorflow::profiler::XSpace;

class TwoChipRuntime final : public rt::RuntimeMetricService::Service {
  grpc::Status GetRuntimeMetric(grpc::ServerContext*, const rt::MetricRequest* request,
                                rt::MetricResponse* response) override {
    if (request->metric_name() != "tpu.runtime.tensorcore.dutycycle.percent") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unsupported");
    }
    for (int device = 0; device < 2; ++device) {
      rt::Metric* m = response->mutable_metric()->add_metrics();
      m->mutable_attribute()->set_key("device-id");
      m->mutable_attribute()->mutable_value()->set_int_attr(device);
      m->mutable_gauge()->set_as_double(device == 0 ? 30.0 : 50.0);
    }
    return grpc::Status::OK;
  }
};

class TfProfilerServer final : public tensorflow::ProfilerService::Service {
 public:
  TfProfilerServer() {
    std::ifstream in(std::string(PODSCOPE_SHARED_TESTDATA) + "/tf_bert_8gpu_host0.xplane.pb", std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    EXPECT_TRUE(space_.ParseFromString(bytes.str()));
  }
  grpc::Status Profile(grpc::ServerContext*, const tensorflow::ProfileRequest* request,
                       tensorflow::ProfileResponse* response) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(request->duration_ms()));
    *response->mutable_xspace() = space_;
    return grpc::Status::OK;
  }
  const XSpace& space() const { return space_; }

 private:
  XSpace space_;
};

// podscope-agent as a child process; killed and reaped on destruction.
class AgentProcess {
 public:
  explicit AgentProcess(const std::vector<std::string>& args, const std::string& ld_library_path) {
    int pipe_fds[2];
    EXPECT_EQ(pipe(pipe_fds), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(pipe_fds[1], STDERR_FILENO);
      close(pipe_fds[0]);
      setenv("LD_LIBRARY_PATH", ld_library_path.c_str(), 1);
      std::vector<char*> argv;
      std::string binary = std::string(PODSCOPE_BINARY_DIR) + "/bin/podscope-agent";
      argv.push_back(binary.data());
      std::vector<std::string> copy = args;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(pipe_fds[1]);
    stderr_fd_ = pipe_fds[0];
    // Wait (bounded) for "podscope-agent listening grpc=HOST:PORT metrics=HOST:PORT".
    const std::regex listening("listening grpc=([^ ]+) metrics=([^ ]+)");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    char buf[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      ssize_t n = read(stderr_fd_, buf, sizeof(buf));
      if (n <= 0) break;
      log_.append(buf, n);
      std::smatch m;
      if (std::regex_search(log_, m, listening)) {
        grpc_address_ = m[1];
        break;
      }
    }
  }
  ~AgentProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    if (stderr_fd_ >= 0) close(stderr_fd_);
  }
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& log() const { return log_; }

 private:
  pid_t pid_ = -1;
  int stderr_fd_ = -1;
  std::string log_;
  std::string grpc_address_;
};

size_t event_count(const XSpace& space, std::string_view plane_name) {
  size_t n = 0;
  for (const auto& plane : space.planes()) {
    if (plane.name() != plane_name) continue;
    for (const auto& line : plane.lines()) n += line.events_size();
  }
  return n;
}

bool has_counter_track(const XSpace& space, std::string_view plane_name, std::string_view track) {
  const auto* plane = podscope::xspace::find_plane(space, plane_name);
  if (plane == nullptr) return false;
  podscope::xspace::XPlaneReader reader(*plane);
  const auto* line = reader.find_line("_counters_");
  if (line == nullptr) return false;
  bool found = false;
  reader.for_each_event(*line, [&](const podscope::xspace::XEventView& e) { found |= e.name() == track; });
  return found;
}

TEST(AgentDeviceTest, CaptureCarriesGpuAndTpuCountersAndTheFrameworksDeviceTrace) {
  TwoChipRuntime tpu_service;
  TfProfilerServer tf_service;
  int tpu_port = 0, tf_port = 0;
  grpc::ServerBuilder tpu_builder;
  tpu_builder.AddListeningPort("127.0.0.1:0", grpc::experimental::LocalServerCredentials(LOCAL_TCP), &tpu_port);
  tpu_builder.RegisterService(&tpu_service);
  auto tpu_server = tpu_builder.BuildAndStart();
  grpc::ServerBuilder tf_builder;
  tf_builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &tf_port);
  tf_builder.SetMaxSendMessageSize(1 << 30);
  tf_builder.RegisterService(&tf_service);
  auto tf_server = tf_builder.BuildAndStart();

  const std::string socket = "/tmp/podscope_device_test_" + std::to_string(getpid()) + ".sock";
  AgentProcess agent({"--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--socket", socket,
                      "--sample_interval_ms", "100", "--upstream", "127.0.0.1:" + std::to_string(tf_port),
                      "--tpu_metrics_addr", "127.0.0.1:" + std::to_string(tpu_port)},
                     std::string(PODSCOPE_BINARY_DIR) + "/tests/fake_nvml");
  ASSERT_FALSE(agent.grpc_address().empty()) << agent.log();

  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(1 << 30);
  auto stub = tensorflow::ProfilerService::NewStub(
      grpc::CreateCustomChannel(agent.grpc_address(), grpc::InsecureChannelCredentials(), args));
  // Let both device collectors run a pass first (the TPU client polls every second).
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  tensorflow::ProfileRequest request;
  request.set_duration_ms(1500);
  request.set_emit_xspace(true);
  request.set_session_id("device-test");
  tensorflow::ProfileResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const grpc::Status status = stub->Profile(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << agent.log();
  const XSpace& space = response.xspace();

  // The framework's device trace, whole (its old, non-epoch timestamps are not filtered by our window).
  for (const char* plane : {"/device:GPU:4", "/device:GPU:6"}) {
    EXPECT_EQ(event_count(space, plane), event_count(tf_service.space(), plane)) << plane;
  }
  // NVML counters on the GPU planes, libtpu duty cycle on the TPU planes.
  EXPECT_TRUE(has_counter_track(space, "/device:GPU:0", "podscope_gpu_utilization_ratio"));
  EXPECT_TRUE(has_counter_track(space, "/device:GPU:1", "podscope_gpu_power_watts"));
  EXPECT_TRUE(has_counter_track(space, "/device:TPU:1", "podscope_tpu_tensorcore_duty_cycle_ratio")) << agent.log();
  for (const auto& w : space.warnings()) EXPECT_THAT(w, ::testing::Not(HasSubstr("upstream"))) << w;

  tf_server->Shutdown();
  tpu_server->Shutdown();
}

TEST(AgentDeviceTest, HostWithoutDevicesSaysWhyInTheCaptureAndStillAnswers) {
  // A port nobody listens on, for the TPU metric service.
  int dead_port = 0;
  {
    TwoChipRuntime unused;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &dead_port);
    builder.RegisterService(&unused);
    builder.BuildAndStart()->Shutdown();
  }
  const std::string socket = "/tmp/podscope_device_test2_" + std::to_string(getpid()) + ".sock";
  AgentProcess agent({"--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--socket", socket,
                      "--tpu_metrics_addr", "127.0.0.1:" + std::to_string(dead_port)},
                     "/nonexistent");
  ASSERT_FALSE(agent.grpc_address().empty()) << agent.log();
  auto stub = tensorflow::ProfilerService::NewStub(
      grpc::CreateChannel(agent.grpc_address(), grpc::InsecureChannelCredentials()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  tensorflow::ProfileRequest request;
  request.set_duration_ms(200);
  request.set_emit_xspace(true);
  tensorflow::ProfileResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  const grpc::Status status = stub->Profile(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << agent.log();
  std::string warnings;
  for (const auto& w : response.xspace().warnings()) warnings += w + "\n";
  EXPECT_THAT(warnings, HasSubstr("cannot load libnvidia-ml.so.1"));
  EXPECT_THAT(warnings, HasSubstr("libtpu metric service at 127.0.0.1:" + std::to_string(dead_port)));
  EXPECT_EQ(podscope::xspace::find_plane(response.xspace(), "/device:GPU:0"), nullptr);
}

#ifdef CUPTI_LIBRARY  // built with the CUDA toolkit
// libpodscope_cupti.so in its default mode: it registers with the agent through libpodscope and opens its
// CUPTI window exactly while the agent captures (here CUPTI then reports that there is no GPU).
TEST(AgentDeviceTest, InjectedCuptiLibraryFollowsTheAgentsCaptureWindow) {
  const std::string socket = "/tmp/podscope_device_test3_" + std::to_string(getpid()) + ".sock";
  AgentProcess agent({"--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--socket", socket}, "/nonexistent");
  ASSERT_FALSE(agent.grpc_address().empty()) << agent.log();

  const std::string probe_log = socket + ".probe.log";
  const std::string command = "PODSCOPE_AGENT_SOCKET=" + socket + " " + CUPTI_PROBE + " " + CUPTI_LIBRARY +
                              " 2500 > " + probe_log + " 2>&1";
  int probe_status = -1;
  std::thread probe([&] { probe_status = std::system(command.c_str()); });

  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // the probe connects and registers
  auto stub = tensorflow::ProfilerService::NewStub(
      grpc::CreateChannel(agent.grpc_address(), grpc::InsecureChannelCredentials()));
  tensorflow::ProfileRequest request;
  request.set_duration_ms(500);
  request.set_emit_xspace(true);
  tensorflow::ProfileResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  const grpc::Status status = stub->Profile(&context, request, &response);
  probe.join();
  ASSERT_TRUE(status.ok()) << status.error_message();

  std::ifstream in(probe_log);
  std::stringstream log;
  log << in.rdbuf();
  std::remove(probe_log.c_str());
  ASSERT_TRUE(WIFEXITED(probe_status) && WEXITSTATUS(probe_status) == 0) << log.str();
  EXPECT_THAT(log.str(), HasSubstr("probe done"));
  EXPECT_THAT(log.str(), HasSubstr("podscope_cupti: cuptiSubscribe failed"));  // the window opened
  EXPECT_THAT(log.str(), HasSubstr("GPU planes of this window not sent"));      // ... and closed
}

#endif  // CUPTI_LIBRARY

}  // namespace
