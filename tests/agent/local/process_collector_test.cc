// The per-process collector reads CPU time and RSS of registered clients from /proc (here: this test
// process registered through a real socket connection) and forgets nothing it should not.
#include "agent/local/process_collector.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/agent/collectors/recording_sink.h"

namespace podscope::agent {
namespace {

using testing::RecordingSink;

TEST(ProcessCollector, CpuAndResidentMemoryOfRegisteredClients) {
  auto registry = std::make_shared<ClientRegistry>();
  const uint64_t conn = registry->add_connection(
      ::getpid(), ::getuid(), [](std::string) {}, [] {});
  registry->on_register(conn, {local::kProtocolVersion, ::getpid(), "unit", "job", {0}});
  ProcessCollector collector(registry);
  RecordingSink sink;
  volatile double burn = 0;
  for (int i = 0; i < 20'000'000; ++i) burn = burn + i * 0.5;  // some CPU time to see
  collector.sample(1, sink);
  collector.sample(2, sink);  // series declared once
  ASSERT_EQ(sink.series_count(), 2u);
  const SeriesSpec cpu = *sink.find("podscope_process_cpu_seconds_total");
  EXPECT_EQ(cpu.labels[0].second, std::to_string(::getpid()));
  EXPECT_EQ(cpu.labels[1].second, "unit");
  EXPECT_GT(sink.last("podscope_process_cpu_seconds_total"), 0.0);
  EXPECT_GT(sink.last("podscope_process_resident_bytes"), 1024.0 * 1024);
  EXPECT_EQ(collector.status().state, CollectorState::State::kOk);

  registry->remove_connection(conn);
  const size_t recorded = sink.sample_count();
  collector.sample(3, sink);
  EXPECT_EQ(sink.sample_count(), recorded);
}

}  // namespace
}  // namespace podscope::agent
