// SeriesStore: rings wrap without growing, windows select by time, Prometheus mirrors every sample.
#include "agent/series/series_store.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

namespace podscope::agent {
namespace {

std::string scrape(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

TEST(SeriesStore, RingKeepsTheNewestSamplesAndWindowsSelectByTime) {
  prometheus::Registry registry;
  SeriesStore store(registry, "h", 8);
  SeriesId id = store.declare({.metric = "podscope_test_gauge", .help = "t"});
  for (int i = 0; i < 20; ++i) store.record(id, 100 + i, i);
  std::vector<Sample> all;
  store.window(id, 0, 1000, all);
  ASSERT_EQ(all.size(), 8u);
  EXPECT_EQ(all.front().time_ns, 112);
  EXPECT_EQ(all.back().value, 19);
  std::vector<Sample> some;
  store.window(id, 114, 116, some);
  ASSERT_EQ(some.size(), 3u);
  EXPECT_EQ(some[0].value, 14);
  Sample latest;
  ASSERT_TRUE(store.latest(id, latest));
  EXPECT_EQ(latest.time_ns, 119);
}

TEST(SeriesStore, GaugesAndCountersAreMirroredIntoPrometheusWithTheHostLabel) {
  prometheus::Registry registry;
  SeriesStore store(registry, "node-1", 16);
  SeriesId g = store.declare({.metric = "podscope_test_bytes", .help = "t", .labels = {{"device", "sda"}}});
  SeriesId c = store.declare(
      {.metric = "podscope_test_total", .help = "t", .kind = SeriesSpec::Kind::kCounter, .labels = {{"cpu", "0"}}});
  store.record(g, 1, 42);
  store.record(c, 1, 100);  // the source's running total
  store.record(c, 2, 130);
  std::string text = scrape(registry);
  EXPECT_NE(text.find("podscope_test_bytes{host=\"node-1\",device=\"sda\"} 42"), std::string::npos) << text;
  EXPECT_NE(text.find("podscope_test_total{host=\"node-1\",cpu=\"0\"} 130"), std::string::npos) << text;
  store.record(c, 3, 5);  // the source restarted: the Prometheus counter never goes down
  text = scrape(registry);
  EXPECT_NE(text.find("podscope_test_total{host=\"node-1\",cpu=\"0\"} 135"), std::string::npos) << text;
}

TEST(SeriesStore, SeveralSeriesShareOneFamily) {
  prometheus::Registry registry;
  SeriesStore store(registry, "h", 4);
  store.declare({.metric = "podscope_x", .help = "t", .labels = {{"cpu", "0"}}});
  store.declare({.metric = "podscope_x", .help = "t", .labels = {{"cpu", "1"}}});
  EXPECT_EQ(registry.Collect().size(), 1u);
  EXPECT_EQ(store.size(), 2u);
}

TEST(SeriesStore, CapacityCoversTheLongestWindow) {
  EXPECT_GE(SeriesStore::capacity_for(600000, 1000), 601u);
  EXPECT_EQ(SeriesStore::capacity_for(24LL * 3600 * 1000, 10), 65536u);  // capped
}

}  // namespace
}  // namespace podscope::agent
