// The per-process collector reads CPU time and RSS of registered clients from /proc (here: this test
// process registered through a real socket connection) and forgets nothing it should not.
#include "agent/local/process_collector.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

namespace podscope::agent {
namespace {

class RecordingSink : public SampleSink {
 public:
  SeriesId declare(const SeriesSpec& spec) override {
    specs.push_back(spec);
    return static_cast<SeriesId>(specs.size() - 1);
  }
  void record(SeriesId id, int64_t, double value) override { last[specs[id].metric] = value; }
  std::vector<SeriesSpec> specs;
  std::map<std::string, double> last;
};

TEST(ProcessCollector, CpuAndResidentMemoryOfRegisteredClients) {
  auto registry = std::make_shared<ClientRegistry>();
  const uint64_t conn = registry->add_connection(::getpid(), ::getuid(), [](std::string) {}, [] {});
  registry->on_register(conn, {local::kProtocolVersion, ::getpid(), "unit", "job", {0}});
  ProcessCollector collector(registry);
  RecordingSink sink;
  volatile double burn = 0;
  for (int i = 0; i < 20'000'000; ++i) burn = burn + i * 0.5;  // some CPU time to see
  collector.sample(1, sink);
  collector.sample(2, sink);  // series declared once
  ASSERT_EQ(sink.specs.size(), 2u);
  EXPECT_EQ(sink.specs[0].labels[0].second, std::to_string(::getpid()));
  EXPECT_EQ(sink.specs[0].labels[1].second, "unit");
  EXPECT_GT(sink.last["podscope_process_cpu_seconds_total"], 0.0);
  EXPECT_GT(sink.last["podscope_process_resident_bytes"], 1024.0 * 1024);
  EXPECT_EQ(collector.status().state, CollectorState::State::kOk);

  registry->remove_connection(conn);
  sink.last.clear();
  collector.sample(3, sink);
  EXPECT_TRUE(sink.last.empty());
}

}  // namespace
}  // namespace podscope::agent
