// Capture memory and latency under a flood of annotations, each next to a baseline measured in the same run:
//   held bytes per event: flood-shaped events in the compact event store vs the same events kept as decoded
//   batches (how the agent held them before), both as RSS growth ÷ events;
//   a real podscope-agent at its default capture_memory_limit_mb with F niced annotation_flood processes:
//   its RSS growth over the whole capture ÷ the limit and what it still holds 3 s after answering, the answer's
//   bytes per kept event, and Profile's answer time beyond the duration vs the
//   target (2 s + 1 s per million events kept) and vs a capture with no clients.
// Usage: capture_memory_bench [--floods 8] [--threads 1] [--duration_ms 5000] [--events 4000000]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/events/compact_event_store.h"
#include "tests/integration/agent_process.h"
#include "tests/integration/flood_process.h"

namespace podscope::bench {
namespace {

using local::EventKind;

// One batch of flood-shaped events: `steps` steps, each a step event and 9 computes, 20 µs apart.
local::EventsMsg flood_batch(int64_t first_step, int64_t steps) {
  local::EventsMsg b;
  b.core = 0;
  b.thread_id = 4242;
  b.names = {{1, "train"}, {2, "matmul"}};
  for (int64_t s = first_step; s < first_step + steps; ++s) {
    const int64_t t = 1'700'000'000'000'000'000 + s * 200'000;
    b.events.push_back({EventKind::kStep, 1, 0, t, 190'000, s, 0});
    for (int i = 0; i < 9; ++i) b.events.push_back({EventKind::kCompute, 2, 0, t + 20'000 * i, 15'000, 1 << 20, 4096});
  }
  return b;
}

double rss_growth_per_event(int64_t before_kib, uint64_t events) {
  return static_cast<double>(testing::status_kib(::getpid(), "VmRSS") - before_kib) * 1024 /
         static_cast<double>(events);
}

void held_bytes_per_event(uint64_t events) {
  const int64_t steps_per_batch = 100;  // 1,000 events, a client's typical batch
  double compact = 0, batches = 0;
  {
    const int64_t before = testing::status_kib(::getpid(), "VmRSS");
    agent::CompactEventStore store(size_t{64} << 30, agent::Retention::kEarliestAndLatest);
    for (uint64_t held = 0; held < events; held += steps_per_batch * 10)
      store.add(1, flood_batch(static_cast<int64_t>(held / 10), steps_per_batch));
    compact = rss_growth_per_event(before, store.held_events());
    std::printf("compact store: %.1f bytes of record per event\n",
                static_cast<double>(store.record_bytes()) / static_cast<double>(store.held_events()));
  }
  {
    const int64_t before = testing::status_kib(::getpid(), "VmRSS");
    std::vector<local::EventsMsg> held;
    for (uint64_t n = 0; n < events; n += steps_per_batch * 10)
      held.push_back(flood_batch(static_cast<int64_t>(n / 10), steps_per_batch));
    batches = rss_growth_per_event(before, events);
  }
  std::printf(
      "held bytes per event (RSS growth / events, %llu events): compact store %.1f, decoded batches %.1f "
      "(baseline); ratio %.2f; target <= 48\n",
      static_cast<unsigned long long>(events), compact, batches, compact / batches);
}

struct CaptureFigures {
  double growth_mib = 0;
  double answer_s = 0;  // beyond the duration
  double answer_mib = 0;
  double after_mib = 0;  // RSS growth 3 s after the answer: what the agent kept
  uint64_t kept = 0, dropped = 0;
};

CaptureFigures capture(testing::AgentProcess& agent, int64_t duration_ms) {
  tensorflow::ProfileResponse warm_up;
  testing::profile_xspace(agent, 200, warm_up);
  warm_up.Clear();
  testing::reset_peak_rss(agent.pid());
  const int64_t before = testing::status_kib(agent.pid(), "VmRSS");
  tensorflow::ProfileResponse response;
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = testing::profile_xspace(agent, duration_ms, response);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CaptureFigures f;
  f.growth_mib = static_cast<double>(testing::status_kib(agent.pid(), "VmHWM") - before) / 1024;
  f.answer_s = took - static_cast<double>(duration_ms) / 1000;
  if (!status.ok()) std::fprintf(stderr, "Profile failed: %s\n", status.error_message().c_str());
  f.answer_mib = static_cast<double>(response.ByteSizeLong()) / (1 << 20);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  f.after_mib = static_cast<double>(testing::status_kib(agent.pid(), "VmRSS") - before) / 1024;
  for (const auto& plane : response.xspace().planes()) {
    if (plane.name().rfind("/device:CUSTOM:", 0) != 0) continue;
    for (const auto& line : plane.lines()) f.kept += static_cast<uint64_t>(line.events_size());
  }
  return f;
}

void agent_under_flood(int floods, int threads, int64_t duration_ms) {
  testing::AgentProcess agent({});
  const CaptureFigures idle = capture(agent, duration_ms);
  std::vector<std::unique_ptr<testing::FloodProcess>> running;
  for (int core = 0; core < floods; ++core)
    running.push_back(std::make_unique<testing::FloodProcess>(agent.socket_dir() + "/agent.sock", core, threads, 9));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (testing::registered_clients(agent) < floods && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const CaptureFigures flood = capture(agent, duration_ms);
  const double limit_mib = 256;
  std::printf(
      "agent, %d floods of %d thread(s), %lld ms capture, capture_memory_limit_mb %.0f: RSS growth %.0f MiB = %.2f of "
      "the "
      "limit, %.0f MiB kept 3 s after the answer; %llu events kept; answer %.0f MiB (%.1f bytes per kept event); "
      "answered %.2f s after the duration (target %.2f s; no clients: %.2f s)\n",
      floods, threads, static_cast<long long>(duration_ms), limit_mib, flood.growth_mib, flood.growth_mib / limit_mib,
      flood.after_mib, static_cast<unsigned long long>(flood.kept), flood.answer_mib,
      flood.kept == 0 ? 0.0 : flood.answer_mib * (1 << 20) / static_cast<double>(flood.kept), flood.answer_s,
      2.0 + static_cast<double>(flood.kept) / 1e6, idle.answer_s);
  for (int i = 0; i < 50; ++i) agent.read_some(10);
  for (size_t at = agent.output().find("local clients:"); at != std::string::npos;
       at = agent.output().find("local clients:", at + 1)) {
    std::printf("  agent log: %s\n", agent.output().substr(at, agent.output().find('\n', at) - at).c_str());
  }
}

}  // namespace
}  // namespace podscope::bench

int main(int argc, char** argv) {
  int floods = 8, threads = 1;
  int64_t duration_ms = 5000;
  uint64_t events = 4'000'000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--floods") == 0) floods = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--duration_ms") == 0) duration_ms = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--events") == 0) events = std::strtoull(argv[i + 1], nullptr, 10);
  }
  podscope::bench::held_bytes_per_event(events);
  podscope::bench::agent_under_flood(floods, threads, duration_ms);
}
