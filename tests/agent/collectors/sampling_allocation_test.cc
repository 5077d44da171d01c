// The sampling pass allocates nothing in the steady state: every host collector on this host's real
// /proc, into the series store and the Prometheus registry, plus the state of the (unavailable) device
// collectors, counted by a replaced global operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <new>

#include "agent/devices/nvml_collector.h"
#include "agent/collectors/host_collectors.h"
#include "agent/collectors/sampler.h"
#include "agent/series/series_store.h"
#include "agent/devices/tpu_runtime_collector.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace podscope::agent {
namespace {

// A libtpu metric service that is not there.
class AbsentTpuService : public TpuMetricSource {
 public:
  absl::StatusOr<std::vector<TpuMetricPoint>> get(std::string_view) override {
    return absl::UnavailableError("libtpu metric service at localhost:8431: nothing listening");
  }
  std::string_view address() const override { return "localhost:8431"; }
};

TEST(SamplingPass, AllocatesNothingInTheSteadyState) {
  prometheus::Registry registry;
  SeriesStore store(registry, "h", 64);
  boost::asio::io_context io;
  Clock clock;
  Sampler sampler(io, clock, store, registry, "h", std::chrono::milliseconds(1000));
  const HostCollectors host = make_host_collectors();
  for (const auto& c : host.all) sampler.add(*c);
  // The device collectors run on their own threads, but every pass reads their state for
  // podscope_collector_status, as the agent wires them; here they are unavailable (long reasons).
  NvmlCollector nvml("/nonexistent/libnvidia-ml.so.1");
  TpuRuntimeCollector tpu(std::make_unique<AbsentTpuService>(), TpuHostInventory{});
  for (Collector* c : std::initializer_list<Collector*>{&nvml, &tpu}) {
    c->sample(clock.now_ns(), store);
    ASSERT_EQ(c->state(), CollectorState::State::kUnavailable);
    sampler.status_metrics().add(*c);
  }
  sampler.run_pass();  // declares the series
  sampler.run_pass();
  counting = true;
  for (int i = 0; i < 50; ++i) sampler.run_pass();
  counting = false;
  EXPECT_EQ(allocations.load(), 0);
}

}  // namespace
}  // namespace podscope::agent
