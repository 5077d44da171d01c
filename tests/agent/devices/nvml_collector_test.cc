// NvmlCollector through the real dlopen path, against a stand-in libnvidia-ml.so.1 built by the tests.
#include "agent/devices/nvml_collector.h"

#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/agent/collectors/recording_sink.h"

namespace podscope::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;
using testing::RecordingSink;

constexpr int64_t kNow = 1'700'000'000'000'000'000;

class NvmlCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("FAKE_NVML_GPUS");
    unsetenv("FAKE_NVML_INIT_ERROR");
  }
  void TearDown() override { SetUp(); }
  const std::string fake_ = FAKE_NVML_LIBRARY;
};

TEST_F(NvmlCollectorTest, ReportsEveryGpuInBaseUnitsWithIdentityLabels) {
  NvmlCollector collector(fake_);
  RecordingSink sink;
  collector.sample(kNow, sink);
  ASSERT_EQ(collector.status().state, CollectorState::State::kOk) << collector.status().reason;

  auto util = sink.find("podscope_gpu_utilization_ratio", {{"gpu", "1"}});
  ASSERT_TRUE(util);
  EXPECT_THAT(util->labels,
              ::testing::ElementsAre(Pair("gpu", "1"), Pair("uuid", "GPU-00000000-0000-0000-0000-000000000001"),
                                     Pair("pci_bus_id", "00000000:19:00.0"), Pair("model", "NVIDIA H100 80GB HBM3")));
  EXPECT_EQ(util->plane, "/device:GPU:1");
  EXPECT_EQ(util->track, "podscope_gpu_utilization_ratio");
  EXPECT_DOUBLE_EQ(*sink.last("podscope_gpu_utilization_ratio", {{"gpu", "0"}}), 0.40);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_gpu_utilization_ratio", {{"gpu", "1"}}), 0.60);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_gpu_memory_used_bytes", {{"gpu", "1"}}), 11.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(*sink.last("podscope_gpu_memory_total_bytes", {{"gpu", "0"}}), 80.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(*sink.last("podscope_gpu_power_watts", {{"gpu", "0"}}), 350.5);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_gpu_temperature_celsius", {{"gpu", "0"}}), 61);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_gpu_sm_clock_hertz", {{"gpu", "0"}}), 1980e6);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_gpu_memory_clock_hertz", {{"gpu", "0"}}), 2619e6);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_gpu_pcie_tx_bytes_per_second", {{"gpu", "0"}}), 1000 * 1024.0);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_gpu_pcie_rx_bytes_per_second", {{"gpu", "0"}}), 2000 * 1024.0);
  // NVLink counters only where the GPU has NVLink (GPU 1 answers NOT_SUPPORTED: no series, no error).
  auto nvlink = sink.find("podscope_gpu_nvlink_tx_bytes_total", {{"gpu", "0"}});
  ASSERT_TRUE(nvlink);
  EXPECT_EQ(nvlink->kind, SeriesSpec::Kind::kCounter);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_gpu_nvlink_rx_bytes_total", {{"gpu", "0"}}), 8192 * 1024.0);
  EXPECT_FALSE(sink.find("podscope_gpu_nvlink_tx_bytes_total", {{"gpu", "1"}}));

  auto device = collector.device_utilization();
  ASSERT_TRUE(device);
  EXPECT_EQ(device->device_type, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(device->device_count, 2);
  EXPECT_DOUBLE_EQ(device->utilization_percent, 50);
}

TEST_F(NvmlCollectorTest, SeriesAreDeclaredOnceAndSampledEveryPass) {
  NvmlCollector collector(fake_);
  RecordingSink sink;
  collector.sample(kNow, sink);
  const size_t declared = sink.series_count();
  collector.sample(kNow + 1'000'000'000, sink);
  EXPECT_EQ(sink.series_count(), declared);
  EXPECT_EQ(declared, 2 * 10 + 2u);  // ten gauges per GPU, NVLink tx/rx on GPU 0
}

TEST_F(NvmlCollectorTest, MissingLibraryIsUnavailableWithTheReason) {
  NvmlCollector collector("/nonexistent/libnvidia-ml.so.1");
  RecordingSink sink;
  collector.sample(kNow, sink);
  const CollectorState state = collector.status();
  EXPECT_EQ(state.state, CollectorState::State::kUnavailable);
  EXPECT_THAT(state.reason, ::testing::StartsWith("cannot load /nonexistent/libnvidia-ml.so.1"));
  // The state word is added once, by describe(), never by the collector as well.
  EXPECT_THAT(describe(state), ::testing::StartsWith("unavailable: cannot load /nonexistent/libnvidia-ml.so.1"));
  EXPECT_EQ(sink.series_count(), 0u);
  EXPECT_FALSE(collector.device_utilization());
}

TEST_F(NvmlCollectorTest, NoGpusIsUnavailable) {
  setenv("FAKE_NVML_GPUS", "0", 1);
  NvmlCollector collector(fake_);
  RecordingSink sink;
  collector.sample(kNow, sink);
  EXPECT_EQ(collector.status().state, CollectorState::State::kUnavailable);
  EXPECT_EQ(describe(collector.status()), "unavailable: NVML reports no GPUs");
}

TEST_F(NvmlCollectorTest, FailedInitNamesTheDriverErrorAndRetriesOnlyAfterTheRetryPeriod) {
  setenv("FAKE_NVML_INIT_ERROR", "9", 1);
  NvmlCollector collector(fake_);
  RecordingSink sink;
  collector.sample(kNow, sink);
  EXPECT_EQ(describe(collector.status()), "unavailable: nvmlInit failed: Driver Not Loaded");

  unsetenv("FAKE_NVML_INIT_ERROR");
  collector.sample(kNow + 1'000'000'000, sink);  // within the retry period: still unavailable
  EXPECT_EQ(collector.status().state, CollectorState::State::kUnavailable);
  collector.sample(kNow + NvmlCollector::kRetryPeriodNs, sink);  // the driver came up meanwhile
  EXPECT_EQ(collector.status().state, CollectorState::State::kOk);
  EXPECT_TRUE(sink.find("podscope_gpu_utilization_ratio", {{"gpu", "0"}}));
}

}  // namespace
}  // namespace podscope::agent
