// tf_run_name names runs in local time, as TensorFlow's profiler client does.
#include "daemon/run_name.h"

#include <gtest/gtest.h>

#include "tests/daemon/scoped_time_zone.h"

namespace podscope {
namespace {

constexpr int64_t kInstantNs = 1'700'000'000'000'000'123;  // 2023-11-14 22:13:20 UTC

TEST(TfRunName, IsTheLocalTimeFarFromUtc) {
  const testing::ScopedTimeZone zone("<+14>-14");  // UTC+14, without needing tzdata
  EXPECT_EQ(tf_run_name(kInstantNs), "2023_11_15_12_13_20");
}

TEST(TfRunName, IsTheUtcTimeInUtc) {
  const testing::ScopedTimeZone zone("UTC0");
  EXPECT_EQ(tf_run_name(kInstantNs), "2023_11_14_22_13_20");
}

}  // namespace
}  // namespace podscope
