// Fan-out benchmark: synchronized capture of N lightweight agents (real gRPC servers speaking
// tensorflow.ProfilerService and podscope.v1.Agent, all in this process, channels pre-connected), for
// N = 16, 64, 256, 1024. Prints a table:
//   sync               the clock-sync burst to every agent before the capture (16 pings each)
//   sync→started       from the end of that burst to the last agent's actual start (the start margin,
//                      printed beside it, is most of it)
//   start skew         max − min of the agents' actual starts, beside the baseline: N threads sleeping
//                      until one CLOCK_REALTIME instant (clock_nanosleep TIMER_ABSTIME), max − min wake time
//   late               the latest start after the common instant T (> 0: a request arrived after T)
//   T→all back         from the common start instant to the last Profile answer (duration + gather)
//   total              wall time of the whole capture (bursts + margin + duration + gather)
// then the start skew at N = 64 over mutual TLS (certificates from tests/integration/test_certs.py, channels
// pre-established, so the handshakes are done before the capture) beside plaintext, measured in the same run,
// then the clock-sync error against the injected offsets, without and with emulated network jitter.
// Usage: coord_fanout_bench [--duration_ms 1000] [--max_agents 1024]
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <filesystem>

#include "pod_capture/capture.h"
#include "tests/pod_capture/lightweight_agent.h"
#include "tls/credentials.h"

namespace {

using podscope::Clock;
using podscope::pod_capture::AgentConnection;
using podscope::testing::LightweightAgent;
using podscope::testing::LightweightAgentOptions;
using podscope::testing::TimerThread;

int64_t now_ns() { return Clock().now_ns(); }

// N threads sleep until one absolute instant; returns max − min of their wake times.
int64_t bare_timer_skew_ns(int threads) {
  std::vector<int64_t> woke(static_cast<size_t>(threads));
  const int64_t target = now_ns() + 200'000'000;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      timespec ts{static_cast<time_t>(target / 1'000'000'000), static_cast<long>(target % 1'000'000'000)};
      while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr) != 0) {}
      woke[static_cast<size_t>(i)] = now_ns();
    });
  }
  for (auto& t : pool) t.join();
  const auto [lo, hi] = std::minmax_element(woke.begin(), woke.end());
  return *hi - *lo;
}

// How the agents serve and the capture dials them.
struct Transport {
  std::shared_ptr<grpc::ServerCredentials> server = grpc::InsecureServerCredentials();
  std::shared_ptr<grpc::ChannelCredentials> channel = grpc::InsecureChannelCredentials();
};

// Mutual TLS with the test certificates made into `dir`: agents serve server.pem and require a client
// certificate of ca.pem; the capture presents cli.pem.
Transport mutual_tls(const std::filesystem::path& dir) {
  const std::string make = "python3 " PODSCOPE_SOURCE_DIR "/tests/integration/test_certs.py " + dir.string();
  if (std::system(make.c_str()) != 0) {
    std::fprintf(stderr, "cannot make test certificates: %s\n", make.c_str());
    std::exit(1);
  }
  const std::string ca = (dir / "ca.pem").string();
  podscope::tls::TlsConfig agent{
      .cert = (dir / "server.pem").string(), .key = (dir / "server.key").string(), .client_ca = ca};
  podscope::tls::TlsConfig client{.cert = (dir / "cli.pem").string(), .key = (dir / "cli.key").string(), .ca = ca};
  return {podscope::tls::server_credentials(agent), podscope::tls::channel_credentials(client)};
}

struct Fleet {
  TimerThread timers;
  std::vector<std::unique_ptr<LightweightAgent>> agents;
  std::vector<std::unique_ptr<AgentConnection>> connections;
  std::vector<int64_t> offsets;

  Fleet(int n, int64_t jitter_ns, int64_t one_way_ns, uint64_t seed, const Transport& transport = {}) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> offset(-50'000'000, 50'000'000);
    for (int i = 0; i < n; ++i) {
      LightweightAgentOptions o;
      o.host_name = "agent" + std::to_string(i);
      o.credentials = transport.server;
      o.clock_offset_ns = offset(rng);
      o.ping_request_delay_ns = one_way_ns;
      o.ping_response_delay_ns = one_way_ns;
      o.ping_jitter_ns = jitter_ns;
      offsets.push_back(o.clock_offset_ns);
      agents.push_back(std::make_unique<LightweightAgent>(o, timers));
      connections.push_back(podscope::pod_capture::connect_agent(agents.back()->address(), transport.channel));
    }
    for (auto& c : connections)
      c->channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }
  std::vector<AgentConnection*> targets() {
    std::vector<AgentConnection*> out;
    for (auto& c : connections) out.push_back(c.get());
    return out;
  }
};

struct ErrorStats {
  int64_t p50, p90, max;
};

ErrorStats clock_errors(Fleet& fleet, int pings) {
  const auto measured = podscope::pod_capture::measure_clocks(fleet.targets(), Clock(), pings, 2000);
  std::vector<int64_t> errors;
  for (size_t i = 0; i < measured.size(); ++i) {
    errors.push_back(std::abs(measured[i].estimate.offset_ns - fleet.offsets[i]));
  }
  std::sort(errors.begin(), errors.end());
  return {errors[errors.size() / 2], errors[errors.size() * 9 / 10], errors.back()};
}

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }
double us(int64_t ns) { return static_cast<double>(ns) / 1e3; }

struct FanoutRow {
  int64_t sync_ns, sync_to_started_ns, margin_ms, skew_ns, baseline_ns, late_ns, all_back_ns, total_ns;
  int captured;
};

// One synchronized capture of `n` agents served over `transport`.
FanoutRow fanout(int n, int64_t duration_ms, const Transport& transport) {
  Fleet fleet(n, 0, 0, static_cast<uint64_t>(n), transport);
  podscope::pod_capture::CaptureSpec spec;
  spec.duration_ms = duration_ms;
  spec.num_tracing_attempts = 1;
  const int64_t begin = now_ns();
  auto result = podscope::pod_capture::run_capture(fleet.targets(), spec, Clock(), [](const std::string&) {});
  const int64_t total = now_ns() - begin;
  std::vector<int64_t> starts;
  for (auto& a : fleet.agents) {
    const auto s = a->actual_starts_system_ns();
    if (!s.empty()) starts.push_back(s.front());
  }
  if (starts.empty()) {
    std::fprintf(stderr, "no agent started a capture at N = %d\n", n);
    std::exit(1);
  }
  const auto [lo, hi] = std::minmax_element(starts.begin(), starts.end());
  const int64_t margin_ms = podscope::pod_capture::fanout_margin_ms(static_cast<size_t>(n));
  const int64_t sync_end = result.start_ns - margin_ms * 1'000'000;
  return FanoutRow{.sync_ns = sync_end - result.sync_begin_ns,
                   .sync_to_started_ns = *hi - sync_end,
                   .margin_ms = margin_ms,
                   .skew_ns = *hi - *lo,
                   .baseline_ns = bare_timer_skew_ns(n),
                   .late_ns = *hi - result.start_ns,
                   .all_back_ns = result.gathered_ns - result.start_ns,
                   .total_ns = total,
                   .captured = static_cast<int>(
                       std::count_if(result.hosts.begin(), result.hosts.end(), [](const auto& h) { return h.ok; }))};
}

double ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; }

// Mutual TLS beside plaintext at N = `n`, one after the other in this run, with their ratio.
void print_tls_comparison(int n, int64_t duration_ms) {
  const std::filesystem::path cert_dir =
      std::filesystem::temp_directory_path() / ("podscope_bench_tls_" + std::to_string(getpid()));
  {
    const Transport tls = mutual_tls(cert_dir);  // its file watchers stop before the files go
    std::printf("\nstart skew at N = %d, plaintext and mutual TLS (channels pre-established)\n", n);
    std::printf("%-10s %8s %12s %15s %6s %11s %9s\n", "transport", "sync", "start skew", "bare-timer skew", "ratio",
                "T→all back", "captured");
    const FanoutRow plaintext = fanout(n, duration_ms, Transport{});
    const FanoutRow mtls = fanout(n, duration_ms, tls);
    for (const auto& [name, r] : {std::pair{"plaintext", plaintext}, std::pair{"mTLS", mtls}}) {
      std::printf("%-10s %5.1f ms %9.3f ms %12.3f ms %6.2f %8.0f ms %5d/%d\n", name, ms(r.sync_ns), ms(r.skew_ns),
                  ms(r.baseline_ns), ratio(r.skew_ns, r.baseline_ns), ms(r.all_back_ns), r.captured, n);
    }
    std::printf("mTLS / plaintext: start skew %.2f, sync %.2f\n", ratio(mtls.skew_ns, plaintext.skew_ns),
                ratio(mtls.sync_ns, plaintext.sync_ns));
  }
  std::filesystem::remove_all(cert_dir);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t duration_ms = 1000;
  int max_agents = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--duration_ms") == 0) duration_ms = std::stoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--max_agents") == 0) max_agents = std::stoi(argv[i + 1]);
  }
  // Each agent costs a listening socket and both ends of a connection.
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);

  std::printf("fan-out: %lld ms captures of N lightweight agents in one process, %u CPUs\n\n",
              static_cast<long long>(duration_ms), std::thread::hardware_concurrency());
  std::printf("%6s %10s %13s %8s %12s %15s %6s %10s %11s %9s %9s\n", "N", "sync", "sync→started", "margin",
              "start skew", "bare-timer skew", "ratio", "late", "T→all back", "total", "captured");
  for (int n : {16, 64, 256, 1024}) {
    if (n > max_agents) break;
    const FanoutRow r = fanout(n, duration_ms, Transport{});
    std::printf("%6d %7.1f ms %10.1f ms %5lld ms %9.3f ms %12.3f ms %6.2f %7.3f ms %8.0f ms %6.0f ms %5d/%d\n", n,
                ms(r.sync_ns), ms(r.sync_to_started_ns), static_cast<long long>(r.margin_ms), ms(r.skew_ns),
                ms(r.baseline_ns), ratio(r.skew_ns, r.baseline_ns), ms(r.late_ns), ms(r.all_back_ns), ms(r.total_ns),
                r.captured, n);
  }

  print_tls_comparison(std::min(64, max_agents), duration_ms);

  std::printf("\nclock-sync error |measured − injected offset| (offsets uniform in ±50 ms, 16 pings per agent)\n");
  std::printf("%6s %-34s %10s %10s %10s\n", "N", "path", "p50", "p90", "max");
  for (int n : {16, 64}) {
    if (n > max_agents) break;
    struct Path {
      const char* name;
      int64_t one_way, jitter;
    };
    for (const Path& path : {Path{"loopback", 0, 0}, Path{"+1 ms each way, ±200 µs jitter", 1'000'000, 200'000}}) {
      Fleet fleet(n, path.jitter, path.one_way, 1000 + static_cast<uint64_t>(n));
      const ErrorStats e = clock_errors(fleet, 16);
      std::printf("%6d %-34s %7.1f µs %7.1f µs %7.1f µs\n", n, path.name, us(e.p50), us(e.p90), us(e.max));
    }
  }
  return 0;
}
