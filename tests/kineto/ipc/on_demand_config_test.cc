#include "kineto/ipc/on_demand_config.h"

#include <gtest/gtest.h>

namespace podscope::kineto::ipc {
namespace {

TEST(OnDemandConfig, TextHasKinetosKeys) {
  const std::string text = on_demand_config_text({"/tmp/podscope-kineto-x/trace3.json", 1790000000123, 2500, "3"});
  EXPECT_EQ(text,
            "ACTIVITIES_LOG_FILE=/tmp/podscope-kineto-x/trace3.json\n"
            "PROFILE_START_TIME=1790000000123\n"
            "ACTIVITIES_DURATION_MSECS=2500\n"
            "ACTIVITIES_WARMUP_PERIOD_SECS=0\n"
            "PROFILE_REPORT_INPUT_SHAPES=true\n"
            "REQUEST_TRACE_ID=3\n");
}

TEST(OnDemandConfig, DeliveredPathHasThePidAsKinetoInsertsIt) {
  EXPECT_EQ(delivered_trace_path("/tmp/d/trace3.json", 6097), "/tmp/d/trace3_6097.json");
  EXPECT_EQ(delivered_trace_path("/tmp/d/run.pt.trace.json", 12), "/tmp/d/run_12.pt.trace.json");
  EXPECT_EQ(delivered_trace_path("/tmp/d/trace", 12), "/tmp/d/trace");
}

}  // namespace
}  // namespace podscope::kineto::ipc
