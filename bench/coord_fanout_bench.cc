// Fan-out benchmark: synchronized captures, measured as users see them, for
//   - N lightweight agents (real gRPC servers speaking tensorflow.ProfilerService and podscope.v1.Agent, all in
//     this process, channels pre-connected), each starting its capture on its own timer thread as separate agents
//     do, for N = 16, 64, 256, 1024;
//   - P real podscope-agent processes on this host (--agent_processes, default 16).
// Per row:
//   sync               the opening clock-sync burst to every agent, per agent, and the pings per agent it took
//   issue, margin      from its end to the last Profile call issued, and to the planned start T
//   close              how long the second burst, which runs while the agents capture, went on after the last
//                      answer was in
//   clock error        |measured − true offset| of every agent, p50 / p99: of the opening burst (which sets the
//                      starts) and of both bursts pooled (which the host files are merged with); the true offset
//                      is the injected one for in-process agents and 0 for agent processes on this host; `over`
//                      counts the agents whose pooled error exceeded the bound reported with it (must be none)
//   late p50/p99/max   each agent's actual start after the planned instant T (coordinator time), as percentiles;
//                      skew is max − min
//   baseline           the same figures for N independent timers sleeping until one CLOCK_REALTIME instant
//                      (clock_nanosleep TIMER_ABSTIME): N threads beside the in-process agents, N processes beside
//                      the agent processes; the capture can be no more punctual than its agents' own timers
//   total              wall time of the whole capture (bursts + margin + duration + gather), and beyond duration
// then the start lateness at N = 64 over mutual TLS (certificates from tests/integration/test_certs.py, channels
// pre-established) beside plaintext, measured in the same run, then the clock-sync error against the injected
// offsets, without and with emulated network jitter, then one burst to 256 and 1024 agents by pings in flight
// (fixed, and sized from the RTTs), then the same across an emulated network (remote agents ~300 µs away, their
// paths on sleeping timers that cost this process no CPU while a ping travels): bursts, and whole captures.
// Usage: coord_fanout_bench [--duration_ms 1000] [--max_agents 1024] [--agent_processes 16]
//                           [--sections fanout,processes,tls,errors,bursts,remote] (default: all)
#include <sys/resource.h>
#include <sys/wait.h>
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

#include "absl/strings/str_split.h"
#include "pod_capture/capture.h"
#include "tests/integration/agent_process.h"
#include "tests/pod_capture/lightweight_agent.h"
#include "tls/credentials.h"

namespace {

using podscope::Clock;
using podscope::pod_capture::AgentConnection;
using podscope::pod_capture::BurstPlan;
using podscope::testing::AgentProcess;
using podscope::testing::LightweightAgent;
using podscope::testing::LightweightAgentOptions;
using podscope::testing::TimerThread;

int64_t now_ns() { return Clock().now_ns(); }

timespec timespec_of(int64_t ns) {
  return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

// How late a set of starts came after the planned instant.
struct Lateness {
  int64_t p50 = 0, p99 = 0, max = 0, skew = 0;
};

Lateness lateness_of(std::vector<int64_t> starts, int64_t planned_ns) {
  Lateness out;
  if (starts.empty()) return out;
  std::sort(starts.begin(), starts.end());
  auto at = [&](size_t percent) {
    return starts[std::min(starts.size() - 1, starts.size() * percent / 100)] - planned_ns;
  };
  out.p50 = at(50);
  out.p99 = at(99);
  out.max = starts.back() - planned_ns;
  out.skew = starts.back() - starts.front();
  return out;
}

// N threads, each sleeping on its own until one absolute instant: how late they woke.
Lateness thread_timers(int threads) {
  std::vector<int64_t> woke(static_cast<size_t>(threads));
  const int64_t target = now_ns() + 200'000'000;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      const timespec ts = timespec_of(target);
      while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr) != 0) {}
      woke[static_cast<size_t>(i)] = now_ns();
    });
  }
  for (auto& t : pool) t.join();
  return lateness_of(woke, target);
}

// N processes, each sleeping on its own until one absolute instant: how late they woke. A child does only
// what is safe after fork in a threaded process (sleep, read the clock, write, _exit).
Lateness process_timers(int processes) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) std::exit(1);
  const int64_t target = now_ns() + 300'000'000;
  std::vector<pid_t> children;
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      const timespec ts = timespec_of(target);
      while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr) != 0) {}
      timespec woke{};
      clock_gettime(CLOCK_REALTIME, &woke);
      const int64_t woke_ns = woke.tv_sec * 1'000'000'000LL + woke.tv_nsec;
      if (write(pipe_fds[1], &woke_ns, sizeof woke_ns) != sizeof woke_ns) _exit(1);
      _exit(0);
    }
    children.push_back(pid);
  }
  close(pipe_fds[1]);
  std::vector<int64_t> woke;
  int64_t value = 0;
  while (read(pipe_fds[0], &value, sizeof value) == sizeof value) woke.push_back(value);
  close(pipe_fds[0]);
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  return lateness_of(woke, target);
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

// The ping paths of a fleet: loopback as it is, or a network emulated by delays (each way, with uniform jitter) on
// the agents' own punctual timers, or on a few sleeping timers shared by the fleet, which cost no CPU while a ping
// is on its way, as remote agents' paths would.
struct Path {
  int64_t one_way_ns = 0, jitter_ns = 0;
  int sleeping_timers = 0;
};

struct Fleet {
  std::vector<std::unique_ptr<TimerThread>> path_timers;
  std::vector<std::unique_ptr<TimerThread>> timers;  // one per agent: each starts on its own, as agents do
  std::vector<std::unique_ptr<LightweightAgent>> agents;
  std::vector<std::unique_ptr<AgentConnection>> connections;
  std::vector<int64_t> offsets;

  Fleet(int n, const Path& path, uint64_t seed, const Transport& transport = {}) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> offset(-50'000'000, 50'000'000);
    for (int t = 0; t < path.sleeping_timers; ++t)
      path_timers.push_back(std::make_unique<TimerThread>(TimerThread::Wait::kSleeping));
    for (int i = 0; i < n; ++i) {
      LightweightAgentOptions o;
      o.host_name = "agent" + std::to_string(i);
      o.credentials = transport.server;
      o.clock_offset_ns = offset(rng);
      if (!path_timers.empty()) o.path_timers = path_timers[static_cast<size_t>(i) % path_timers.size()].get();
      o.ping_request_delay_ns = path.one_way_ns;
      o.ping_response_delay_ns = path.one_way_ns;
      o.ping_jitter_ns = path.jitter_ns;
      offsets.push_back(o.clock_offset_ns);
      timers.push_back(std::make_unique<TimerThread>());
      agents.push_back(std::make_unique<LightweightAgent>(o, *timers.back()));
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
  int64_t p50 = 0, p99 = 0, max = 0;
};

ErrorStats error_stats(std::vector<int64_t> errors) {
  if (errors.empty()) return {};
  std::sort(errors.begin(), errors.end());
  return {errors[errors.size() / 2], errors[std::min(errors.size() - 1, errors.size() * 99 / 100)], errors.back()};
}

ErrorStats clock_errors(Fleet& fleet, int pings) {
  const auto measured = podscope::pod_capture::measure_clocks(fleet.targets(), Clock(), pings, 2000).clocks;
  std::vector<int64_t> errors;
  for (size_t i = 0; i < measured.size(); ++i) {
    errors.push_back(std::abs(measured[i].estimate.offset_ns - fleet.offsets[i]));
  }
  return error_stats(std::move(errors));
}

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }
double us(int64_t ns) { return static_cast<double>(ns) / 1e3; }

// One clock-sync burst of up to 16 pings to each of `n` in-process agents over `path`, with `window`: its time, pings
// per agent, the most pings it had in flight, the smallest RTTs, the error against the injected offsets, its bound,
// and how many agents' errors exceeded their bound (which must be none).
void print_burst_row(int n, const Path& path, BurstPlan window) {
  Fleet fleet(n, path, 2000 + static_cast<uint64_t>(n));
  const int64_t begin = now_ns();
  const auto burst = podscope::pod_capture::measure_clocks(fleet.targets(), Clock(), 16, 2000, window);
  const int64_t took = now_ns() - begin;
  std::vector<int64_t> errors, rtts, bounds;
  size_t pings = 0, over_bound = 0;
  for (size_t i = 0; i < burst.clocks.size(); ++i) {
    const auto& estimate = burst.clocks[i].estimate;
    errors.push_back(std::abs(estimate.offset_ns - fleet.offsets[i]));
    rtts.push_back(estimate.rtt_ns);
    bounds.push_back(estimate.error_bound_ns);
    over_bound += errors.back() > estimate.error_bound_ns ? 1 : 0;
    pings += burst.clocks[i].exchanges.size();
  }
  const ErrorStats e = error_stats(std::move(errors));
  const ErrorStats r = error_stats(std::move(rtts));
  const ErrorStats b = error_stats(std::move(bounds));
  char shape[32];
  std::snprintf(shape, sizeof shape, "%s%d", window.sized_from_rtts ? "sized ≤ " : "", window.max_in_flight);
  std::printf("%6d %-12s %5d %9.1f ms %6.1f %7.1f / %7.1f µs | %7.1f / %7.1f / %7.1f µs | %7.1f / %7.1f µs %5zu\n", n,
              shape, burst.largest_window, ms(took), static_cast<double>(pings) / n, us(r.p50), us(r.p99), us(e.p50),
              us(e.p99), us(e.max), us(b.p50), us(b.p99), over_bound);
}

void print_burst_header() {
  std::printf("%6s %-12s %5s %12s %6s %-21s | %-31s | %-20s %5s\n", "N", "window", "most", "burst", "pings",
              "rtt_min p50 / p99", "error p50 / p99 / max", "bound p50 / p99", "over");
}

struct FanoutRow {
  int n = 0;
  int64_t sync_ns = 0, issue_ns = 0, close_ns = 0, margin_ns = 0, total_ns = 0, duration_ms = 0;
  ErrorStats opening_error, pooled_error;
  double pings_per_agent = 0;  // answered pings of the opening burst (it ends early once settled)
  Lateness late, baseline;
  int captured = 0;
  int over_bound = 0;  // agents whose pooled error exceeded its bound (must be none)
};

// The figures of one capture whose agents started at `starts` (coordinator time) and whose true clock offsets
// are `true_offsets`, begun at `begin_ns` and returned at `end_ns`.
FanoutRow row_of(const podscope::pod_capture::CaptureResult& result, const std::vector<int64_t>& starts,
                 const std::vector<int64_t>& true_offsets, int n, int64_t begin_ns, int64_t end_ns) {
  if (starts.empty()) {
    std::fprintf(stderr, "no agent started a capture at N = %d\n", n);
    std::exit(1);
  }
  FanoutRow row;
  row.n = n;
  row.sync_ns = result.synced_ns - result.sync_begin_ns;
  row.margin_ns = result.start_ns - result.synced_ns;
  row.issue_ns = result.issued_ns - result.synced_ns;
  row.close_ns = end_ns - result.gathered_ns;
  row.total_ns = end_ns - begin_ns;
  row.duration_ms = result.duration_ms;
  std::vector<int64_t> opening, pooled;
  for (size_t i = 0; i < result.hosts.size(); ++i) {
    const auto& host = result.hosts[i];
    opening.push_back(std::abs(host.clock_before.estimate.offset_ns - true_offsets[i]));
    pooled.push_back(std::abs(host.clock.estimate.offset_ns - true_offsets[i]));
    row.over_bound += pooled.back() > host.clock.estimate.error_bound_ns ? 1 : 0;
  }
  row.opening_error = error_stats(std::move(opening));
  row.pooled_error = error_stats(std::move(pooled));
  row.late = lateness_of(starts, result.start_ns);
  size_t pings = 0;
  for (const auto& host : result.hosts) pings += host.clock_before.exchanges.size();
  row.pings_per_agent = static_cast<double>(pings) / n;
  row.captured =
      static_cast<int>(std::count_if(result.hosts.begin(), result.hosts.end(), [](const auto& h) { return h.ok; }));
  return row;
}

podscope::pod_capture::CaptureSpec spec_of(int64_t duration_ms) {
  podscope::pod_capture::CaptureSpec spec;
  spec.duration_ms = duration_ms;
  spec.num_tracing_attempts = 1;
  return spec;
}

// One synchronized capture of `n` in-process agents served over `transport`.
FanoutRow fanout(int n, int64_t duration_ms, const Transport& transport, const Path& path = {}) {
  Fleet fleet(n, path, static_cast<uint64_t>(n), transport);
  const int64_t begin = now_ns();
  const auto result =
      podscope::pod_capture::run_capture(fleet.targets(), spec_of(duration_ms), Clock(), [](const std::string&) {});
  const int64_t end = now_ns();
  std::vector<int64_t> starts;
  for (auto& a : fleet.agents) {
    const auto s = a->actual_starts_system_ns();
    if (!s.empty()) starts.push_back(s.front());
  }
  FanoutRow row = row_of(result, starts, fleet.offsets, n, begin, end);
  row.baseline = thread_timers(n);
  return row;
}

// One synchronized capture of `n` podscope-agent processes; their starts are the ones their host files record,
// in coordinator time.
FanoutRow process_fanout(int n, int64_t duration_ms) {
  std::vector<std::unique_ptr<AgentProcess>> processes;
  std::vector<std::unique_ptr<AgentConnection>> connections;
  std::vector<AgentConnection*> targets;
  for (int i = 0; i < n; ++i) {
    processes.push_back(std::make_unique<AgentProcess>(
        std::vector<std::string>{"--host_name", "agent" + std::to_string(i), "--sample_interval_ms", "1000"}));
    connections.push_back(
        podscope::pod_capture::connect_agent(processes.back()->grpc_address(), grpc::InsecureChannelCredentials()));
    targets.push_back(connections.back().get());
  }
  for (auto& c : connections) c->channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const int64_t begin = now_ns();
  const auto result =
      podscope::pod_capture::run_capture(targets, spec_of(duration_ms), Clock(), [](const std::string&) {});
  const int64_t end = now_ns();
  std::vector<int64_t> starts;
  for (const auto& host : result.hosts) {
    if (host.actual_start_merged_ns) starts.push_back(*host.actual_start_merged_ns);
  }
  // The agents share this host's clock: their true offset is 0.
  FanoutRow row = row_of(result, starts, std::vector<int64_t>(static_cast<size_t>(n), 0), n, begin, end);
  row.baseline = process_timers(n);
  return row;
}

void print_header(const char* baseline) {
  std::printf("%6s %9s %9s %5s %9s %9s %9s | %-34s | %-34s | %8s %9s %9s | %-27s %4s\n", "N", "sync", "per agent",
              "pings", "issue", "margin", "close", "start after T: p50 / p99 / max, skew", baseline, "total",
              "−duration", "captured", "clock error µs: open, pooled", "over");
}

void print_row(const FanoutRow& r) {
  auto lateness = [](const Lateness& l) {
    char text[64];
    std::snprintf(text, sizeof text, "%6.3f / %6.3f / %6.3f, %6.3f ms", ms(l.p50), ms(l.p99), ms(l.max), ms(l.skew));
    return std::string(text);
  };
  auto error = [](const ErrorStats& e) {
    char text[32];
    std::snprintf(text, sizeof text, "%5.1f / %6.1f", us(e.p50), us(e.p99));
    return std::string(text);
  };
  std::printf(
      "%6d %6.1f ms %6.3f ms %5.1f %6.1f ms %6.1f ms %6.1f ms | %-34s | %-34s | %5.0f ms %6.0f ms %5d/%d | %s, %s "
      "%4d\n",
      r.n, ms(r.sync_ns), ms(r.sync_ns) / r.n, r.pings_per_agent, ms(r.issue_ns), ms(r.margin_ns), ms(r.close_ns),
      lateness(r.late).c_str(), lateness(r.baseline).c_str(), ms(r.total_ns),
      ms(r.total_ns) - static_cast<double>(r.duration_ms), r.captured, r.n, error(r.opening_error).c_str(),
      error(r.pooled_error).c_str(), r.over_bound);
}

double ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; }

// Mutual TLS beside plaintext at N = `n`, one after the other in this run, with their ratio.
void print_tls_comparison(int n, int64_t duration_ms) {
  const std::filesystem::path cert_dir =
      std::filesystem::temp_directory_path() / ("podscope_bench_tls_" + std::to_string(getpid()));
  {
    const Transport tls = mutual_tls(cert_dir);  // its file watchers stop before the files go
    std::printf("\nN = %d in-process agents, plaintext then mutual TLS (channels pre-established)\n", n);
    std::printf("%-10s", "transport");
    print_header("N timer threads: p50 / p99 / max, skew");
    const FanoutRow plaintext = fanout(n, duration_ms, Transport{});
    const FanoutRow mtls = fanout(n, duration_ms, tls);
    std::printf("%-10s", "plaintext");
    print_row(plaintext);
    std::printf("%-10s", "mTLS");
    print_row(mtls);
    std::printf("mTLS / plaintext: start p99 %.2f, sync %.2f\n", ratio(mtls.late.p99, plaintext.late.p99),
                ratio(mtls.sync_ns, plaintext.sync_ns));
  }
  std::filesystem::remove_all(cert_dir);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t duration_ms = 1000;
  int max_agents = 1024;
  int agent_processes = 16;
  std::string sections = "fanout,processes,tls,errors,bursts,remote";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--sections") == 0) sections = argv[i + 1];
    if (std::strcmp(argv[i], "--duration_ms") == 0) duration_ms = std::stoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--max_agents") == 0) max_agents = std::stoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--agent_processes") == 0) agent_processes = std::stoi(argv[i + 1]);
  }
  // Each agent costs a listening socket and both ends of a connection.
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);

  const std::vector<std::string> wanted = absl::StrSplit(sections, ',');
  const auto wants = [&](const std::string& section) {
    return std::find(wanted.begin(), wanted.end(), section) != wanted.end();
  };

  std::printf("fan-out: %lld ms captures, %u CPUs; times in ms after the planned start T\n\n",
              static_cast<long long>(duration_ms), std::thread::hardware_concurrency());
  if (wants("fanout")) {
    std::printf("N lightweight agents in this process, each on its own timer thread\n");
    print_header("N timer threads: p50 / p99 / max, skew");
    for (int n : {16, 64, 256, 1024}) {
      if (n > max_agents) break;
      print_row(fanout(n, duration_ms, Transport{}));
    }
  }
  if (wants("processes") && agent_processes > 0) {
    std::printf("\nN podscope-agent processes\n");
    print_header("N timer processes: p50 / p99 / max, skew");
    print_row(process_fanout(agent_processes, duration_ms));
  }

  if (wants("tls")) print_tls_comparison(std::min(64, max_agents), duration_ms);

  if (wants("errors")) {
    std::printf("\nclock-sync error |measured − injected offset| (offsets uniform in ±50 ms, 16 pings per agent)\n");
    std::printf("%6s %-34s %10s %10s %10s\n", "N", "path", "p50", "p99", "max");
    for (int n : {16, 64}) {
      if (n > max_agents) break;
      struct NamedPath {
        const char* name;
        Path path;
      };
      for (const NamedPath& named :
           {NamedPath{"loopback", {}}, NamedPath{"+1 ms each way, ±200 µs jitter", {1'000'000, 200'000}}}) {
        Fleet fleet(n, named.path, 1000 + static_cast<uint64_t>(n));
        const ErrorStats e = clock_errors(fleet, 16);
        std::printf("%6d %-34s %7.1f µs %7.1f µs %7.1f µs\n", n, named.name, us(e.p50), us(e.p99), us(e.max));
      }
    }
  }

  if (wants("bursts")) {
    std::printf("\none clock-sync burst (up to 16 pings each) by pings in flight through one completion queue\n");
    print_burst_header();
    for (int n : {256, 1024}) {
      if (n > max_agents) break;
      for (int in_flight : {1, 4, 16}) print_burst_row(n, {}, {.max_in_flight = in_flight});
      print_burst_row(n, {}, {.max_in_flight = 16, .sized_from_rtts = true});
    }
  }

  if (wants("remote")) {
    // A fleet's RTT (~300 µs) on paths that cost this process no CPU while a ping travels.
    const Path remote{.one_way_ns = 150'000, .jitter_ns = 20'000, .sleeping_timers = 4};
    std::printf("\nacross an emulated network: 150 µs each way ± 20 µs, on 4 sleeping path timers\n");
    print_burst_header();
    for (int n : {256, 1024}) {
      if (n > max_agents) break;
      print_burst_row(n, remote, {.max_in_flight = 1});
      print_burst_row(n, remote, {.max_in_flight = 16, .sized_from_rtts = true});
      print_burst_row(n, remote, {.max_in_flight = 16});
    }
    std::printf("\nN lightweight agents across that network, one capture each\n");
    print_header("N timer threads: p50 / p99 / max, skew");
    for (int n : {256, 1024}) {
      if (n > max_agents) break;
      print_row(fanout(n, duration_ms, Transport{}, remote));
    }
  }
  return 0;
}
