// The agent's own metrics in Prometheus' text: podscope_build_info names the build, and every request counter is
// its own series of the host, at 0 until its event happens.
#include "agent/service/agent_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <prometheus/text_serializer.h>

namespace podscope::agent {
namespace {

using ::testing::HasSubstr;

std::string text_of(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

TEST(AgentMetrics, BuildInfoNamesTheVersion) {
  prometheus::Registry registry;
  register_build_info(registry, "h", "1.2.3");
  EXPECT_THAT(text_of(registry), HasSubstr("podscope_build_info{host=\"h\",version=\"1.2.3\"} 1\n"));
}

TEST(AgentMetrics, EachRequestCounterIsItsOwnSeriesOfTheHost) {
  prometheus::Registry registry;
  RequestMetrics metrics(registry, "h");
  metrics.captures_refused.Increment();
  metrics.upstream_answers_refused.Increment(3);
  const std::string text = text_of(registry);
  for (const char* zero :
       {"podscope_captures_total", "podscope_monitor_errors_total", "podscope_config_reload_errors_total",
        "podscope_config_reload_options_refused_total", "podscope_monitors_total", "podscope_pod_sessions_total",
        "podscope_fanout_refused_total", "podscope_heap_returned_bytes_total", "podscope_answers_refused_total",
        "podscope_repository_writes_refused_total", "podscope_interrupted_writes_removed_total",
        "podscope_interrupted_writes_removed_bytes_total"}) {
    EXPECT_THAT(text, HasSubstr(std::string(zero) + "{host=\"h\"} 0\n"));
  }
  EXPECT_THAT(text, HasSubstr("podscope_capture_errors_total{host=\"h\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("podscope_capture_inputs_refused_total{host=\"h\",source=\"upstream\"} 3\n"));
}

}  // namespace
}  // namespace podscope::agent
