// Capture memory and latency under a flood of annotations, each next to a baseline measured in the same run:
//   held bytes per event: flood-shaped events in the compact event store vs the same events kept as decoded
//   batches (how the agent held them before), both as RSS growth ÷ events;
//   a real podscope-agent at capture_memory_limit_mb (--limit_mb) with F niced annotation_flood processes:
//   its RSS growth over the whole capture ÷ the limit and what it still holds 3 s after answering, the answer's
//   bytes per kept event, what its window was charged per kept event (the agent's log), and Profile's answer time
//   beyond the duration vs the target (1 s) and vs a capture with no clients; with --baseline_agent, the same
//   against that binary too (an earlier build), alternated run by run.
// Usage: capture_memory_bench [--floods 8] [--threads 1] [--duration_ms 5000] [--events 4000000] [--limit_mb 256]
//                             [--runs 1] [--baseline_agent PATH]
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
#include "tests/integration/tensorflow_client_wire.h"

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
  // Answered when its bytes are in: this client's parse of them is no part of the agent's answer time.
  tensorflow::ProfileRequest request;
  request.set_duration_ms(static_cast<uint64_t>(duration_ms));
  request.set_max_events(1'000'000);
  request.set_emit_xspace(true);
  const auto start = std::chrono::steady_clock::now();
  const testing::RawReply reply =
      testing::call_with_bytes(agent.channel(), "/tensorflow.ProfilerService/Profile", request.SerializeAsString(),
                               static_cast<int>(duration_ms / 1000) + 60);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CaptureFigures f;
  f.growth_mib = static_cast<double>(testing::status_kib(agent.pid(), "VmHWM") - before) / 1024;
  f.answer_s = took - static_cast<double>(duration_ms) / 1000;
  if (!reply.status.ok()) std::fprintf(stderr, "Profile failed: %s\n", reply.status.error_message().c_str());
  f.answer_mib = static_cast<double>(reply.bytes.size()) / (1 << 20);
  tensorflow::ProfileResponse response;
  response.ParseFromString(reply.bytes);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  f.after_mib = static_cast<double>(testing::status_kib(agent.pid(), "VmRSS") - before) / 1024;
  for (const auto& plane : response.xspace().planes()) {
    if (plane.name().rfind("/device:CUSTOM:", 0) != 0) continue;
    for (const auto& line : plane.lines()) f.kept += static_cast<uint64_t>(line.events_size());
  }
  return f;
}

// The agent log's line of what the last capture's window held and was charged ("local clients: ...").
std::string last_window_line(testing::AgentProcess& agent) {
  for (int i = 0; i < 50; ++i) agent.read_some(10);
  const size_t at = agent.output().rfind("local clients:");
  if (at == std::string::npos) return "(no window logged)";
  return agent.output().substr(at, agent.output().find('\n', at) - at);
}

void agent_under_flood(const std::string& label, const std::string& binary, int floods, int threads,
                       int64_t duration_ms, int64_t limit_mb) {
  testing::AgentEnvironment environment;
  environment.binary = binary;
  testing::AgentProcess agent({"--capture_memory_limit_mb", std::to_string(limit_mb)}, true, environment);
  const CaptureFigures idle = capture(agent, duration_ms);
  std::vector<std::unique_ptr<testing::FloodProcess>> running;
  for (int core = 0; core < floods; ++core)
    running.push_back(std::make_unique<testing::FloodProcess>(agent.socket_dir() + "/agent.sock", core, threads, 9));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (testing::registered_clients(agent) < floods && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const CaptureFigures flood = capture(agent, duration_ms);
  const double limit_mib = static_cast<double>(limit_mb);
  std::printf(
      "%s agent, %d floods of %d thread(s), %lld ms capture, capture_memory_limit_mb %.0f: RSS growth %.0f MiB = %.2f "
      "of the limit, %.0f MiB kept 3 s after the answer; %llu events kept; answer %.0f MiB (%.1f bytes per kept "
      "event); answered %.2f s after the duration (target 1.00 s; no clients: %.2f s)\n",
      label.c_str(), floods, threads, static_cast<long long>(duration_ms), limit_mib, flood.growth_mib,
      flood.growth_mib / limit_mib, flood.after_mib, static_cast<unsigned long long>(flood.kept), flood.answer_mib,
      flood.kept == 0 ? 0.0 : flood.answer_mib * (1 << 20) / static_cast<double>(flood.kept), flood.answer_s,
      idle.answer_s);
  std::printf("  %s agent log: %s\n", label.c_str(), last_window_line(agent).c_str());
}

}  // namespace
}  // namespace podscope::bench

int main(int argc, char** argv) {
  int floods = 8, threads = 1, runs = 1;
  int64_t duration_ms = 5000, limit_mb = 256;
  uint64_t events = 4'000'000;
  std::string baseline_agent;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--floods") == 0) floods = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--duration_ms") == 0) duration_ms = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--events") == 0) events = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--limit_mb") == 0) limit_mb = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--baseline_agent") == 0) baseline_agent = argv[i + 1];
  }
  podscope::bench::held_bytes_per_event(events);
  for (int run = 0; run < runs; ++run) {
    if (!baseline_agent.empty())
      podscope::bench::agent_under_flood("baseline", baseline_agent, floods, threads, duration_ms, limit_mb);
    podscope::bench::agent_under_flood("this", "", floods, threads, duration_ms, limit_mb);
  }
}
