// libpodscope annotation cost, Google Benchmark. Baseline in the same run:
// clock_gettime(CLOCK_REALTIME), and the TSC read the hot path uses (BM_TickRead). Figures:
//   BM_SpanInactive       — a span while no capture is open (target ≤ 2 ns: one relaxed atomic load)
//   BM_SpanActive         — a span during a capture: two TSC reads + one 32-byte record into the thread's
//                           ring, drained by the real background thread to a real Unix socket (target ≤ 30 ns)
//   BM_ComputeSpanActive  — today's span of two records (a compute span with its bytes)
//   BM_InputStageInactive / BM_InputStageActive — the same for an input stage nested in a parent stage (its
//                           parent id takes a second record: compare with BM_ComputeSpanActive), and
//                           BM_RootInputStageActive for a root stage (one record: compare with BM_SpanActive)
//   BM_AllocInactive / BM_AllocActive / BM_FreeActive — the allocation hook: one call while no capture is open
//                           (compare with BM_SpanInactive), and during a capture, one TSC read + one record
//                           (compare with BM_SpanActive)
//   BM_RingPush           — the ring alone, drained by a consumer thread: events/s per thread (target ≥ 20 M/s)
// Counter bytes_per_event is the buffered record size (target ≤ 32). Counter dropped says how many
// events of the active run were dropped because the ring was full (drops would flatter the figure).
#include <benchmark/benchmark.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include "proto/local/frame_codec.h"
#include "client/podscope.h"
#include "client/thread_ring.h"

namespace {

// A minimal real agent end: accepts one client, welcomes it at the current protocol version, opens a
// capture window at once, and reads (and discards) everything it sends.
class DiscardingAgent {
 public:
  DiscardingAgent() {
    char tmpl[] = "/tmp/podscope-bench-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/agent.sock";
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 1);
    thread_ = std::thread([this] { serve(); });
  }
  ~DiscardingAgent() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (conn_fd_ >= 0) ::shutdown(conn_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  void serve() {
    while (!stop_) {
      conn_fd_ = ::accept(listen_fd_, nullptr, nullptr);
      if (conn_fd_ < 0) return;
      std::string open;  // the answer to the client's Hello, then the window
      podscope::local::encode_frame(podscope::local::WelcomeMsg{podscope::local::kProtocolVersion}, open);
      podscope::local::encode_frame(podscope::local::CaptureOpenMsg{1, 0, 0}, open);
      ::send(conn_fd_, open.data(), open.size(), MSG_NOSIGNAL);
      static char buf[1 << 20];
      while (!stop_ && ::recv(conn_fd_, buf, sizeof(buf), 0) > 0) {}
      ::close(conn_fd_);
    }
  }
  std::string dir_, path_;
  int listen_fd_ = -1;
  std::atomic<int> conn_fd_{-1};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

void BM_ClockGettimeRealtime(benchmark::State& state) {
  timespec ts;
  for (auto _ : state) {
    clock_gettime(CLOCK_REALTIME, &ts);
    benchmark::DoNotOptimize(ts);
  }
}
BENCHMARK(BM_ClockGettimeRealtime);

void BM_TickRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(podscope::detail::now_tick());
}
BENCHMARK(BM_TickRead);

void BM_SpanInactive(benchmark::State& state) {
  const uint8_t saved = podscope::detail::g_level.exchange(podscope::detail::kNoAgent);
  for (auto _ : state) {
    auto span = podscope::send(7, 1, 4096);
    benchmark::DoNotOptimize(span);
  }
  podscope::detail::g_level.store(saved);
}
BENCHMARK(BM_SpanInactive);

// Starts libpodscope against a DiscardingAgent once, waits for its capture window, and creates the calling
// thread's ring outside the timed loop.
void start_capture() {
  static DiscardingAgent* agent = [] {
    auto* a = new DiscardingAgent();
    podscope::Options o;
    o.cores = {0};
    o.socket_path = a->path();
    o.buffer_events = 1 << 22;  // 128 MiB: the drain every 50 ms keeps up without drops
    podscope::init(o);
    return a;
  }();
  (void)agent;
  while (podscope::detail::g_level.load() != podscope::detail::kCapturing)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  { auto first = podscope::send(7, 1, 4096); }
}

// Runs `annotate` once per iteration during a capture, with the counters every active figure reports.
template <typename F>
void run_active(benchmark::State& state, F annotate) {
  start_capture();
  // The background thread empties the ring of the previous run first, so that this one is not dropped.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const uint64_t dropped_before = podscope::dropped_events();
  for (auto _ : state) annotate();
  state.counters["dropped"] = static_cast<double>(podscope::dropped_events() - dropped_before);
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_SpanActive(benchmark::State& state) {
  run_active(state, [] {
    auto span = podscope::send(7, 1, 4096);
    benchmark::DoNotOptimize(span);
  });
}
// A fixed count below the ring's capacity: every event is written, none dropped (see counter `dropped`).
BENCHMARK(BM_SpanActive)->Iterations(1 << 21);

// Today's span of two records: a compute span with its bytes.
void BM_ComputeSpanActive(benchmark::State& state) {
  const podscope::NameId name = podscope::intern("matmul");
  run_active(state, [name] {
    auto span = podscope::compute(name, 1'000'000, 4096);
    benchmark::DoNotOptimize(span);
  });
}
BENCHMARK(BM_ComputeSpanActive)->Iterations(1 << 20);

constexpr uint64_t kParentStageId = (uint64_t{1} << 40) | 1;

void BM_InputStageInactive(benchmark::State& state) {
  const podscope::NameId name = podscope::intern("read_shard");
  const uint8_t saved = podscope::detail::g_level.exchange(podscope::detail::kNoAgent);
  for (auto _ : state) {
    auto stage = podscope::input_stage(name, podscope::InputStageCategory::kRead, kParentStageId);
    benchmark::DoNotOptimize(stage);
  }
  podscope::detail::g_level.store(saved);
}
BENCHMARK(BM_InputStageInactive);

void BM_InputStageActive(benchmark::State& state) {
  const podscope::NameId name = podscope::intern("read_shard");
  run_active(state, [name] {
    auto stage = podscope::input_stage(name, podscope::InputStageCategory::kRead, kParentStageId);
    benchmark::DoNotOptimize(stage);
  });
}
// Two records each: half the iterations of BM_SpanActive fill the ring as far.
BENCHMARK(BM_InputStageActive)->Iterations(1 << 20);

void BM_RootInputStageActive(benchmark::State& state) {
  const podscope::NameId name = podscope::intern("batch");
  run_active(state, [name] {
    auto stage = podscope::input_stage(name, podscope::InputStageCategory::kPreprocess);
    benchmark::DoNotOptimize(stage);
  });
}
BENCHMARK(BM_RootInputStageActive)->Iterations(1 << 21);

void BM_AllocInactive(benchmark::State& state) {
  const podscope::NameId pool = podscope::intern("host_pinned");
  const uint8_t saved = podscope::detail::g_level.exchange(podscope::detail::kNoAgent);
  uint64_t address = 0x7f00'0000'0000;
  for (auto _ : state) {
    podscope::alloc(4096, address, pool);
    address += 4096;
    benchmark::DoNotOptimize(address);
  }
  podscope::detail::g_level.store(saved);
}
BENCHMARK(BM_AllocInactive);

void BM_AllocActive(benchmark::State& state) {
  const podscope::NameId pool = podscope::intern("host_pinned");
  uint64_t address = 0x7f00'0000'0000;
  run_active(state, [pool, &address] {
    podscope::alloc(4096, address, pool);
    address += 4096;
    benchmark::DoNotOptimize(address);
  });
}
BENCHMARK(BM_AllocActive)->Iterations(1 << 21);

void BM_FreeActive(benchmark::State& state) {
  const podscope::NameId pool = podscope::intern("host_pinned");
  uint64_t address = 0x7f00'0000'0000;
  run_active(state, [pool, &address] {
    podscope::free(address, pool);
    address += 4096;
    benchmark::DoNotOptimize(address);
  });
}
BENCHMARK(BM_FreeActive)->Iterations(1 << 21);

void BM_RingPush(benchmark::State& state) {
  podscope::client::ThreadRing ring(1 << 22, 1);
  std::atomic<bool> stop{false};
  std::thread consumer([&] {
    uint64_t sum = 0;
    // Like the real background thread: drain now and then, not in a tight loop.
    while (!stop.load(std::memory_order_relaxed)) {
      ring.drain([&](const podscope::client::RawEvent& e) { sum += e.id; });
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    benchmark::DoNotOptimize(sum);
  });
  podscope::client::RawEvent e{1, 2, 4096, 7, 1, 6, 0};
  for (auto _ : state) {
    e.begin_tick = podscope::detail::now_tick();
    ring.push(&e, 1);
  }
  stop = true;
  consumer.join();
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["bytes_per_event"] = sizeof(podscope::client::RawEvent);
  state.counters["dropped"] = static_cast<double>(ring.dropped());
}
BENCHMARK(BM_RingPush);

}  // namespace

BENCHMARK_MAIN();
