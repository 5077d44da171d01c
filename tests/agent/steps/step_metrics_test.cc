// Step metrics in the Prometheus registry: a step-time histogram and infeed / all-reduce shares per training job
// and core.
#include "agent/steps/step_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

namespace podscope::agent {
namespace {

TEST(StepMetrics, HistogramAndSharesPerCore) {
  prometheus::Registry registry;
  StepMetrics metrics(registry, "h1");
  metrics.record("ring", {0, 1, 1'000'000'000, 1'010'000'000, 2'500'000, 5'000'000});  // 10 ms: 25% infeed, 50% AR
  metrics.record("ring", {0, 2, 1'010'000'000, 1'030'000'000, 0, 0});
  metrics.record("ring", {3, 1, 1'000'000'000, 1'004'000'000, 1'000'000, 0});
  metrics.add_dropped_events(7);
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_NE(text.find("podscope_step_time_seconds_count{host=\"h1\",core=\"0\",training_job=\"ring\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("podscope_step_time_seconds_count{host=\"h1\",core=\"3\",training_job=\"ring\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("podscope_step_time_seconds_bucket{host=\"h1\",core=\"0\",training_job=\"ring\",le=\"0.01\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("podscope_step_infeed_ratio{host=\"h1\",core=\"3\",training_job=\"ring\"} 0.25"),
            std::string::npos);
  EXPECT_NE(text.find("podscope_step_all_reduce_seconds_total{host=\"h1\",core=\"0\",training_job=\"ring\"} 0.005"),
            std::string::npos);
  EXPECT_NE(text.find("podscope_client_dropped_events_total{host=\"h1\"} 7"), std::string::npos);
}

TEST(StepMetrics, TwoJobsOnOneHostKeepSeparateSeriesForTheSameCore) {
  prometheus::Registry registry;
  StepMetrics metrics(registry, "h1");
  metrics.record("bert", {0, 1, 1'000'000'000, 1'010'000'000, 0, 0});
  metrics.record("resnet", {0, 1, 1'000'000'000, 1'020'000'000, 0, 0});
  metrics.record("resnet", {0, 2, 1'020'000'000, 1'040'000'000, 0, 0});
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_NE(text.find("podscope_step_time_seconds_count{host=\"h1\",core=\"0\",training_job=\"bert\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("podscope_step_time_seconds_count{host=\"h1\",core=\"0\",training_job=\"resnet\"} 2"),
            std::string::npos)
      << text;
}

TEST(StepMetrics, StepsWithImpossibleTimesAreNotRecorded) {
  prometheus::Registry registry;
  StepMetrics metrics(registry, "h1");
  metrics.record("j", {0, 1, INT64_MIN, INT64_MAX, 0, 0});                  // span overflows
  metrics.record("j", {0, 2, 1'000'000'000, 1'000'000'000, 0, 0});          // empty
  metrics.record("j", {0, 3, 1'000'000'000, 1'010'000'000, -5, 0});         // negative infeed
  metrics.record("j", {0, 4, 1'000'000'000, 1'010'000'000, 0, INT64_MAX});  // all-reduce longer than the step
  metrics.record("j", {0, 5, 1'000'000'000, 1'010'000'000, 1'000'000, 0});  // a real one
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_NE(text.find("podscope_step_time_seconds_count{host=\"h1\",core=\"0\",training_job=\"j\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("podscope_step_infeed_ratio{host=\"h1\",core=\"0\",training_job=\"j\"} 0.1"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace podscope::agent
