// The device parts through the real podscope-agent binary: the stand-in libnvidia-ml.so.1 found through
// LD_LIBRARY_PATH as the driver's would be, a stand-in libtpu metric server (--tpu_metrics_addr), and a
// stand-in TensorFlow profiler server (--upstream) whose XSpace must come back merged into the agent's capture.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "proto/xspace/xplane_builder.h"
#include "podscope/v1/agent.grpc.pb.h"
#include "proto/xspace/xplane_reader.h"
#include "tensorflow/profiler_service.grpc.pb.h"
#include "tests/integration/agent_process.h"
#include "tests/loopback_grpc_server.h"
#include "tests/proto/xspace/xspace_contents.h"
#include "tests/scratch_directory.h"
#include "tests/shared_testdata.h"
#include "tpu/runtime_metric_service.grpc.pb.h"

namespace {

namespace rt = ::tpu::monitoring::runtime;
using podscope::testing::AgentProcess;
using podscope::testing::event_count;
using tensorflow::profiler::XSpace;
using ::testing::HasSubstr;

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
  explicit TfProfilerServer(const std::filesystem::path& xspace_file) {
    std::ifstream in(xspace_file, std::ios::binary);
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

// The agent's environment: its library path holds the stand-in NVML, or nothing.
podscope::testing::AgentEnvironment with_libraries(const std::string& ld_library_path) {
  podscope::testing::AgentEnvironment environment;
  environment.variables = {"LD_LIBRARY_PATH=" + ld_library_path};
  return environment;
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

// Monitor's text at `level` (duration 200 ms).
std::string monitor(tensorflow::ProfilerService::Stub& stub, int level) {
  tensorflow::MonitorRequest request;
  request.set_duration_ms(200);
  request.set_monitoring_level(level);
  tensorflow::MonitorResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const grpc::Status status = stub.Monitor(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.data();
}

// The stand-in TPU runtime on a free loopback port, with libtpu's local credentials.
struct TpuRuntimeServer {
  TwoChipRuntime service;
  podscope::testing::LoopbackGrpcServer server{service, grpc::experimental::LocalServerCredentials(LOCAL_TCP)};
};

// A loopback port nobody listens on.
int dead_port() {
  TwoChipRuntime unused;
  return podscope::testing::dead_loopback_port(unused);
}

TEST(AgentDeviceTest, MonitorReportsTheTpuDutyCycleWhileTheMetricServiceAnswers) {
  TpuRuntimeServer tpu;
  // The stand-in NVML is there too: the TPU still wins.
  AgentProcess agent({"--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--sample_interval_ms", "100",
                      "--tpu_metrics_addr", tpu.server.address()},
                     true, with_libraries(std::string(PODSCOPE_BINARY_DIR) + "/tests/fake_nvml"));
  auto stub = tensorflow::ProfilerService::NewStub(
      grpc::CreateChannel(agent.grpc_address(), grpc::InsecureChannelCredentials()));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // the TPU client polls every second

  tensorflow::MonitorRequest request;
  request.set_duration_ms(200);
  request.set_monitoring_level(2);
  tensorflow::MonitorResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->Monitor(&context, request, &response).ok());
  const std::string& text = response.data();
  EXPECT_THAT(text, HasSubstr("Device type: TPU\n"));  // no TPU on this PCI bus: no generation to name
  // The mean duty cycle of the two chips (30 %, 50 %), said to be the duty cycle.
  EXPECT_THAT(text, HasSubstr("Utilization of TPU (higher is better): 40.0% (TensorCore duty cycle)"));
  EXPECT_THAT(text, HasSubstr("TPU idle time (lower is better): 60.0%"));
  EXPECT_THAT(text, HasSubstr("Number of TPU cores: 2"));
  EXPECT_DOUBLE_EQ(response.monitor_result().matrix_unit_utilization_percent(), 40.0);
  EXPECT_DOUBLE_EQ(response.monitor_result().device_idle_time_percent(), 60.0);
  EXPECT_THAT(monitor(*stub, 1), HasSubstr("Utilization of TPU (higher is better): 40.0% (TensorCore duty cycle)"));
}

TEST(AgentDeviceTest, MonitorReportsTheGpuWithoutTpuAndTheCpuWithoutEither) {
  const std::string tpu_addr = "127.0.0.1:" + std::to_string(dead_port());
  {
    AgentProcess agent({"--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--sample_interval_ms", "100",
                        "--tpu_metrics_addr", tpu_addr},
                       true, with_libraries(std::string(PODSCOPE_BINARY_DIR) + "/tests/fake_nvml"));
    auto stub = tensorflow::ProfilerService::NewStub(
        grpc::CreateChannel(agent.grpc_address(), grpc::InsecureChannelCredentials()));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const std::string text = monitor(*stub, 2);
    // The stand-in NVML: two GPUs at 40 % and 60 %.
    EXPECT_THAT(text, HasSubstr("Device type: NVIDIA H100 80GB HBM3\n"));
    EXPECT_THAT(text, HasSubstr("Utilization of GPU (higher is better): 50.0% (GPU utilization (NVML"));
    EXPECT_THAT(text, HasSubstr("Number of GPUs: 2"));
  }
  AgentProcess agent({"--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--tpu_metrics_addr", tpu_addr},
                     true, with_libraries("/nonexistent"));
  auto stub = tensorflow::ProfilerService::NewStub(
      grpc::CreateChannel(agent.grpc_address(), grpc::InsecureChannelCredentials()));
  const std::string text = monitor(*stub, 2);
  EXPECT_THAT(text, HasSubstr("Device type: CPU (host, no accelerator)"));
  EXPECT_THAT(text, HasSubstr("Utilization of CPU (higher is better): "));
  EXPECT_THAT(text, HasSubstr("Number of CPU cores: "));
}

TEST(AgentDeviceTest, CaptureCarriesGpuAndTpuCountersAndTheFrameworksDeviceTrace) {
  const auto tf_file = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!tf_file) return;
  TwoChipRuntime tpu_service;
  TfProfilerServer tf_service(*tf_file);
  const podscope::testing::LoopbackGrpcServer tpu_server(tpu_service,
                                                         grpc::experimental::LocalServerCredentials(LOCAL_TCP));
  const podscope::testing::LoopbackGrpcServer tf_server(tf_service);

  AgentProcess agent({"--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--sample_interval_ms", "100",
                      "--upstream", tf_server.address(), "--tpu_metrics_addr", tpu_server.address()},
                     true, with_libraries(std::string(PODSCOPE_BINARY_DIR) + "/tests/fake_nvml"));

  // Let both device collectors run a pass first (the TPU client polls every second).
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const auto [status, response] =
      podscope::testing::profile(agent, podscope::testing::profile_request(1500, "device-test"));
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << agent.output();
  const XSpace& space = response.xspace();

  // The framework's device trace, whole (its old, non-epoch timestamps are not filtered by our window).
  for (const char* plane : {"/device:GPU:4", "/device:GPU:6"}) {
    EXPECT_EQ(event_count(space, plane), event_count(tf_service.space(), plane)) << plane;
  }
  // NVML counters on the GPU planes, libtpu duty cycle on the TPU planes.
  EXPECT_TRUE(has_counter_track(space, "/device:GPU:0", "podscope_gpu_utilization_ratio"));
  EXPECT_TRUE(has_counter_track(space, "/device:GPU:1", "podscope_gpu_power_watts"));
  EXPECT_TRUE(has_counter_track(space, "/device:TPU:1", "podscope_tpu_tensorcore_duty_cycle_ratio")) << agent.output();
  for (const auto& w : space.warnings()) EXPECT_THAT(w, ::testing::Not(HasSubstr("upstream"))) << w;
}

TEST(AgentDeviceTest, HostWithoutDevicesSaysWhyInTheCaptureAndStillAnswers) {
  // A port nobody listens on, for the TPU metric service.
  const int tpu_port = dead_port();
  AgentProcess agent({"--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--tpu_metrics_addr",
                      "127.0.0.1:" + std::to_string(tpu_port)},
                     true, with_libraries("/nonexistent"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto [status, response] =
      podscope::testing::profile(agent, podscope::testing::profile_request(200), std::chrono::seconds(20));
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << agent.output();
  std::string warnings;
  for (const auto& w : response.xspace().warnings()) warnings += w + "\n";
  EXPECT_THAT(warnings, HasSubstr("collector nvml unavailable: cannot load libnvidia-ml.so.1"));
  EXPECT_THAT(warnings, ::testing::Not(HasSubstr("unavailable: unavailable")));
  EXPECT_THAT(warnings, HasSubstr("libtpu metric service at 127.0.0.1:" + std::to_string(tpu_port)));
  EXPECT_EQ(podscope::xspace::find_plane(response.xspace(), "/device:GPU:0"), nullptr);
}

#ifdef CUPTI_LIBRARY  // built with the CUDA toolkit
// libpodscope_cupti.so in its default mode: it registers with the agent through libpodscope, opens its
// CUPTI window exactly while the agent captures (here CUPTI reports that there is no GPU), and sends the
// window's planes (NVTX ranges, CUPTI's warning) to the agent, which merges them into the Profile answer.
// The probe also uses libpodscope itself: one connection, with the job the program gave.
TEST(AgentDeviceTest, InjectedCuptiLibrarySendsTheWindowsPlanesToTheAgent) {
  AgentProcess agent({"--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0"}, true,
                     with_libraries("/nonexistent"));

  const std::string agent_socket = agent.socket_dir() + "/agent.sock";
  const std::string probe_log = agent_socket + ".probe.log";
  const std::string command = "PODSCOPE_AGENT_SOCKET=" + agent_socket + " NVTX_INJECTION64_PATH=" + CUPTI_LIBRARY +
                              " " + CUPTI_PROBE + " " + CUPTI_LIBRARY + " 3000 > " + probe_log + " 2>&1";
  int probe_status = -1;
  std::thread probe([&] { probe_status = std::system(command.c_str()); });

  podscope::v1::AgentStatus status_before;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (status_before.clients_size() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the probe connects and registers
    status_before = podscope::testing::agent_status(agent);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a second connection would show by now

  const auto [status, response] =
      podscope::testing::profile(agent, podscope::testing::profile_request(500), std::chrono::seconds(20));
  podscope::v1::AgentStatus status_after = podscope::testing::agent_status(agent);
  probe.join();
  std::ifstream in(probe_log);
  std::stringstream log;
  log << in.rdbuf();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(WIFEXITED(probe_status) && WEXITSTATUS(probe_status) == 0) << log.str();
  EXPECT_THAT(log.str(), HasSubstr("probe done"));
  EXPECT_THAT(log.str(), HasSubstr("podscope_cupti: cuptiSubscribe failed"));  // the window opened

  // One agent connection for the program and the injected tracer, carrying the program's own job even
  // though the tracer started the link first.
  for (const podscope::v1::AgentStatus* s : {&status_before, &status_after}) {
    ASSERT_EQ(s->clients_size(), 1) << s->DebugString();
    EXPECT_EQ(s->clients(0).job(), "cupti-probe") << s->DebugString();
  }

  // The tracer's planes arrived and were merged: the NVTX ranges of the window, and CUPTI's warning.
  const XSpace& space = response.xspace();
  const auto* host = podscope::xspace::find_plane(space, "/host:CPU");
  ASSERT_NE(host, nullptr);
  size_t nvtx_steps = 0;
  podscope::xspace::XPlaneReader reader(*host);
  for (const auto& line : host->lines()) {
    if (line.name().rfind("NVTX thread ", 0) != 0) continue;
    reader.for_each_event(line, [&](const podscope::xspace::XEventView& e) { nvtx_steps += e.name() == "step"; });
  }
  EXPECT_GE(nvtx_steps, 10u) << "NVTX ranges of a 500 ms window, one per 10 ms";
  std::string warnings;
  for (const auto& w : space.warnings()) warnings += w + "\n";
  EXPECT_THAT(warnings, HasSubstr("CUPTI: cuptiSubscribe failed"));
  EXPECT_THAT(warnings, ::testing::Not(HasSubstr("device planes")));  // whole, nothing cut off
}

#endif  // CUPTI_LIBRARY

}  // namespace
