// TPU runtime metrics: the real gRPC client against a stand-in libtpu metric server that speaks
// tpu.monitoring.runtime.RuntimeMetricService over local credentials, and PCI chip discovery on a fake sysfs.
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/devices/tpu_chips.h"
#include "agent/devices/tpu_metric_client.h"
#include "agent/devices/tpu_runtime_collector.h"
#include "tests/agent/collectors/recording_sink.h"
#include "tests/loopback_grpc_server.h"
#include "tests/scratch_directory.h"
#include "tpu/runtime_metric_service.grpc.pb.h"

namespace podscope::agent {
namespace {

namespace rt = ::tpu::monitoring::runtime;
using ::testing::HasSubstr;
using testing::RecordingSink;

constexpr int64_t kNow = 1'700'000'000'000'000'000;

// Answers like libtpu on a 4-chip v4 host whose runtime lacks the HBM-utilization and idle metrics.
class StandInRuntimeMetricService final : public rt::RuntimeMetricService::Service {
 public:
  grpc::Status GetRuntimeMetric(grpc::ServerContext*, const rt::MetricRequest* request,
                                rt::MetricResponse* response) override {
    {
      std::lock_guard lock(mu_);
      requested_.insert(request->metric_name());
    }
    const std::string& name = request->metric_name();
    auto* metric = response->mutable_metric();
    metric->set_name(name);
    for (int device = 0; device < 4; ++device) {
      rt::Metric* m = metric->add_metrics();
      m->mutable_attribute()->set_key("device-id");
      m->mutable_attribute()->mutable_value()->set_int_attr(device);
      m->mutable_timestamp()->set_seconds(1'700'000'000);
      if (name == "tpu.runtime.tensorcore.dutycycle.percent") {
        m->mutable_gauge()->set_as_double(20.0 * (device + 1));  // 20, 40, 60, 80
      } else if (name == "tpu.runtime.hbm.memory.usage.bytes") {
        m->mutable_gauge()->set_as_int(int64_t{1} << (30 + device));
      } else if (name == "tpu.runtime.hbm.memory.total.bytes") {
        m->mutable_gauge()->set_as_int(int64_t{32} << 30);
      } else {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "metric " + name + " not supported");
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status ListSupportedMetrics(grpc::ServerContext*, const rt::ListSupportedMetricsRequest*,
                                    rt::ListSupportedMetricsResponse* response) override {
    for (const char* name : {"tpu.runtime.tensorcore.dutycycle.percent", "tpu.runtime.hbm.memory.usage.bytes",
                             "tpu.runtime.hbm.memory.total.bytes"}) {
      response->add_supported_metric()->set_metric_name(name);
    }
    return grpc::Status::OK;
  }
  std::set<std::string> requested() const {
    std::lock_guard lock(mu_);
    return requested_;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> requested_;
};

// libtpu's server accepts only local connections; the client must present local credentials.
class StandInServer {
 public:
  std::string address() const { return server_.address(); }
  StandInRuntimeMetricService& service() { return service_; }

 private:
  StandInRuntimeMetricService service_;
  podscope::testing::LoopbackGrpcServer server_{service_, grpc::experimental::LocalServerCredentials(LOCAL_TCP)};
};

// A loopback port nobody listens on: bind one with a server, then shut it down.
std::string dead_address() {
  StandInServer server;
  return server.address();
}

class FakeSysfs {
 public:
  void add(const std::string& address, const std::string& vendor, const std::string& device,
           const std::string& subsystem) {
    auto dir = root() / address;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "vendor") << vendor << "\n";
    std::ofstream(dir / "device") << device << "\n";
    std::ofstream(dir / "subsystem_device") << subsystem << "\n";
  }
  const std::filesystem::path& root() const { return scratch_.path(); }

 private:
  podscope::testing::ScratchDirectory scratch_{"pci"};
};

TEST(TpuChipsTest, FindsGoogleTpusOnThePciBusWithTheirGenerationAndCores) {
  FakeSysfs sysfs;
  sysfs.add("0000:00:05.0", "0x1ae0", "0x0027", "0x004f");  // v3: two TensorCores per chip
  sysfs.add("0000:00:04.0", "0x1ae0", "0x0027", "0x004f");
  sysfs.add("0000:00:03.0", "0x8086", "0x1237", "0x1100");  // the host bridge: not a TPU
  TpuHostInventory inventory = discover_tpu_chips(sysfs.root());
  ASSERT_EQ(inventory.chips.size(), 2u);
  EXPECT_EQ(inventory.chips[0].pci_address, "0000:00:04.0");
  EXPECT_EQ(inventory.type(), "v3");
  EXPECT_EQ(inventory.core_count(), 4);
}

TEST(TpuChipsTest, LaterGenerationsHaveOneCorePerChip) {
  FakeSysfs sysfs;
  for (int i = 0; i < 4; ++i) sysfs.add("0000:00:0" + std::to_string(4 + i) + ".0", "0x1ae0", "0x005e", "0x0000");
  TpuHostInventory inventory = discover_tpu_chips(sysfs.root());
  EXPECT_EQ(inventory.type(), "v4");
  EXPECT_EQ(inventory.core_count(), 4);
}

TEST(TpuChipsTest, MissingPciDirectoryMeansNoTpus) {
  EXPECT_TRUE(discover_tpu_chips("/nonexistent/sys/bus/pci/devices").chips.empty());
}

TEST(TpuMetricClientTest, ReadsValuesPerDeviceAndTheSupportedList) {
  StandInServer server;
  TpuMetricClient client(server.address());
  auto points = client.get("tpu.runtime.hbm.memory.usage.bytes");
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 4u);
  EXPECT_EQ((*points)[3].device_id, 3);
  EXPECT_DOUBLE_EQ((*points)[3].value, double(int64_t{1} << 33));
  auto missing = client.get("tpu.runtime.tensorcore.idle_duration.seconds");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  auto supported = client.list_supported_metrics();
  ASSERT_TRUE(supported.ok()) << supported.status();
  EXPECT_THAT(*supported, ::testing::Contains("tpu.runtime.tensorcore.dutycycle.percent"));
}

TEST(TpuRuntimeCollectorTest, WritesPerDeviceSeriesAndReportsDutyCycleAsTheDeviceUtilization) {
  StandInServer server;
  FakeSysfs sysfs;
  for (int i = 0; i < 4; ++i) sysfs.add("0000:00:0" + std::to_string(4 + i) + ".0", "0x1ae0", "0x005e", "0x0000");
  TpuRuntimeCollector collector(std::make_unique<TpuMetricClient>(server.address()), discover_tpu_chips(sysfs.root()));
  RecordingSink sink;
  collector.sample(kNow, sink);

  EXPECT_EQ(collector.status().state, CollectorState::State::kOk) << collector.status().reason;
  // Every metric of the issue is asked for; the unsupported ones are skipped without a series.
  EXPECT_EQ(server.service().requested().size(), 5u);
  auto duty = sink.find("podscope_tpu_tensorcore_duty_cycle_ratio", {{"tpu", "2"}});
  ASSERT_TRUE(duty);
  EXPECT_EQ(duty->plane, "/device:TPU:2");
  EXPECT_THAT(duty->labels, ::testing::Contains(::testing::Pair("type", "v4")));
  EXPECT_DOUBLE_EQ(*sink.last("podscope_tpu_tensorcore_duty_cycle_ratio", {{"tpu", "2"}}), 0.60);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_tpu_hbm_used_bytes", {{"tpu", "0"}}), double(int64_t{1} << 30));
  EXPECT_DOUBLE_EQ(*sink.last("podscope_tpu_hbm_total_bytes", {{"tpu", "3"}}), double(int64_t{32} << 30));
  EXPECT_FALSE(sink.find("podscope_tpu_tensorcore_idle_seconds", {{"tpu", "0"}}));
  EXPECT_EQ(sink.series_count(), 12u);

  auto device = collector.device_utilization();
  ASSERT_TRUE(device);
  EXPECT_EQ(device->device_type, "TPU v4");
  EXPECT_EQ(device->device_count, 4);
  EXPECT_EQ(device->core_count, 4);
  EXPECT_DOUBLE_EQ(device->utilization_percent, 50);
  EXPECT_EQ(device->utilization_kind, "TensorCore duty cycle");
}

TEST(TpuRuntimeCollectorTest, AbsentServiceIsUnavailableAndQuiet) {
  const std::string address = dead_address();
  TpuRuntimeCollector collector(std::make_unique<TpuMetricClient>(address, std::chrono::milliseconds(300)),
                                TpuHostInventory{});
  RecordingSink sink;
  collector.sample(kNow, sink);
  collector.sample(kNow + 1'000'000'000, sink);
  const CollectorState state = collector.status();
  EXPECT_EQ(state.state, CollectorState::State::kUnavailable);
  EXPECT_THAT(state.reason, ::testing::Not(::testing::StartsWith("unavailable")));  // describe() adds it
  EXPECT_THAT(state.reason, HasSubstr(address));
  EXPECT_THAT(state.reason, HasSubstr("no TPU on the PCI bus"));
  // Found by a plain TCP connect: no gRPC channel is made for a port nobody listens on.
  EXPECT_THAT(state.reason, HasSubstr("nothing listening (connect: Connection refused)"));
  EXPECT_EQ(sink.series_count(), 0u);
  EXPECT_FALSE(collector.device_utilization());
}

TEST(TpuRuntimeCollectorTest, PicksUpARuntimeThatStartsLater) {
  auto server = std::make_unique<StandInServer>();
  const std::string address = server->address();
  server.reset();
  TpuRuntimeCollector collector(std::make_unique<TpuMetricClient>(address, std::chrono::milliseconds(300)),
                                TpuHostInventory{});
  RecordingSink sink;
  collector.sample(kNow, sink);
  ASSERT_EQ(collector.status().state, CollectorState::State::kUnavailable);

  // libtpu comes up on the same port (the training job started after the agent).
  StandInRuntimeMetricService service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::experimental::LocalServerCredentials(LOCAL_TCP));
  builder.RegisterService(&service);
  auto late = builder.BuildAndStart();
  ASSERT_TRUE(late);
  for (int i = 0; i < 20 && collector.status().state != CollectorState::State::kOk; ++i) {
    collector.sample(kNow + (i + 1) * 1'000'000'000LL, sink);
    if (collector.status().state != CollectorState::State::kOk)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(collector.status().state, CollectorState::State::kOk) << collector.status().reason;
  ASSERT_TRUE(collector.device_utilization());
  EXPECT_EQ(collector.device_utilization()->device_type, "TPU");

  // The runtime exits: the channel is dropped and the port is probed again with plain connects ...
  late->Shutdown();
  late.reset();
  collector.sample(kNow + 30'000'000'000LL, sink);
  collector.sample(kNow + 31'000'000'000LL, sink);
  EXPECT_EQ(collector.status().state, CollectorState::State::kUnavailable);
  EXPECT_THAT(collector.status().reason, HasSubstr("nothing listening"));
  EXPECT_FALSE(collector.device_utilization());
  // ... until it comes back.
  grpc::ServerBuilder again_builder;
  again_builder.AddListeningPort(address, grpc::experimental::LocalServerCredentials(LOCAL_TCP));
  again_builder.RegisterService(&service);
  auto again = again_builder.BuildAndStart();
  ASSERT_TRUE(again);
  collector.sample(kNow + 32'000'000'000LL, sink);
  EXPECT_EQ(collector.status().state, CollectorState::State::kOk) << collector.status().reason;
  again->Shutdown();
}

}  // namespace
}  // namespace podscope::agent
