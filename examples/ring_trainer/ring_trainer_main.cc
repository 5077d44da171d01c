// ring_trainer: a real data-parallel training loop across processes, annotated with libpodscope.
// Each step: take a batch from the input pipeline (infeed; the pipeline annotates its read, preprocess and
// enqueue stages, which --slow_read_ms / --slow_preprocess_ms slow down on --slow_input_rank), multiply
// matrices (compute; the straggler rank adds busy float work until --straggler_delay_ms of wall time
// passed, and so do the steps named by --slow_steps on --slow_rank), ring all-reduce the gradients over TCP
// (send / recv-done per chunk), then outfeed a small metrics record.
// The last float of the gradient buffer carries a stop vote, so SIGTERM on any rank ends every rank
// after the same step (exit 0). Its buffers are reported through libpodscope's allocation hook (buffers.h);
// at exit it prints each pool's peak of live bytes.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/podscope.h"
#include "examples/ring_trainer/buffers.h"
#include "examples/ring_trainer/input_pipeline.h"
#include "examples/ring_trainer/ring_allreduce.h"
#include "examples/ring_trainer/spawn.h"

namespace {

using ring_trainer::ModelBuffer;
using ring_trainer::Pool;
using ring_trainer::pool_stats;
using ring_trainer::PoolStats;
using ring_trainer::StepBuffer;

std::atomic<bool> g_stop{false};
void on_stop_signal(int) { g_stop.store(true); }

struct Flags {
  int world = 1;
  int rank = 0;
  int base_port = 29500;
  std::vector<std::string> peers;
  bool spawn = false;
  std::vector<std::string> agent_sockets;
  int input_delay_ms = 0;
  int slow_read_ms = 0;
  int slow_preprocess_ms = 0;
  int slow_input_rank = -1;
  int prefetch_batches = 0;
  int matrix = 128;
  int64_t grad_bytes = 1 << 20;
  int straggler_rank = -1;
  int straggler_delay_ms = 0;
  std::string slow_steps;  // START:COUNT:MS
  int slow_rank = -1;
  int64_t steps = 0;
  int64_t progress_every = 100;
  bool outfeed = true;
  std::string job = "ring_trainer";
  int connect_timeout_ms = 30000;
};

std::vector<ring_trainer::Endpoint> endpoints(const Flags& f) {
  std::vector<ring_trainer::Endpoint> out;
  if (!f.peers.empty()) {
    for (const auto& p : f.peers) {
      const size_t colon = p.rfind(':');
      if (colon == std::string::npos) throw std::invalid_argument("--peers: '" + p + "' is not host:port");
      out.push_back({p.substr(0, colon), std::stoi(p.substr(colon + 1))});
    }
    if (static_cast<int>(out.size()) != f.world) {
      throw std::invalid_argument("--peers names " + std::to_string(out.size()) + " ranks but --world is " +
                                  std::to_string(f.world));
    }
    return out;
  }
  for (int r = 0; r < f.world; ++r) out.push_back({"127.0.0.1", f.base_port + r});
  return out;
}

// C = A × B for m×m matrices (i-k-j order: streams rows of B).
void matmul(const float* a, const float* b, float* c, int m) {
  std::memset(c, 0, sizeof(float) * static_cast<size_t>(m) * m);
  for (int i = 0; i < m; ++i)
    for (int k = 0; k < m; ++k) {
      const float aik = a[i * m + k];
      for (int j = 0; j < m; ++j) c[i * m + j] += aik * b[k * m + j];
    }
}

// Steps [start, start + count) take `ms` more compute on one rank (or every rank), once: a slow spell at a
// chosen time, as a flight recorder's trigger sees it.
struct SlowSteps {
  int64_t start = 0;
  int64_t count = 0;
  int ms = 0;
  int rank = -1;  // -1: every rank
  int delay_ms(int64_t step, int this_rank) const {
    if (step < start || step >= start + count || (rank >= 0 && rank != this_rank)) return 0;
    return ms;
  }
};

SlowSteps parse_slow_steps(const std::string& spec, int rank) {
  SlowSteps out;
  out.rank = rank;
  if (spec.empty()) return out;
  long long start = 0, count = 0;
  int ms = 0;
  char rest = 0;
  if (std::sscanf(spec.c_str(), "%lld:%lld:%d%c", &start, &count, &ms, &rest) != 3 || start < 0 || count < 0 ||
      ms < 0) {
    throw std::invalid_argument("--slow_steps: '" + spec + "' is not START:COUNT:MS (non-negative integers)");
  }
  out.start = start;
  out.count = count;
  out.ms = ms;
  return out;
}

// Real float work until `ms` of wall time passed (not a calibrated amount: CPU contention must not
// shrink or grow the delay).
float busy_work_for(int ms, const ModelBuffer& data) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  float acc = 0;
  size_t i = 0;
  while (std::chrono::steady_clock::now() < until) {
    for (int k = 0; k < 4096; ++k, ++i) acc = acc * 0.999f + data[i % data.size()] * 1.0001f;
  }
  return acc;
}

int train(const Flags& f) {
  const auto peers = endpoints(f);
  const SlowSteps slow = parse_slow_steps(f.slow_steps, f.slow_rank);
  podscope::Options options;
  options.cores = {f.rank};
  options.job = f.job;
  podscope::init(options);

  const size_t m = static_cast<size_t>(f.matrix);
  const bool slow_input = f.slow_input_rank < 0 || f.slow_input_rank == f.rank;
  ring_trainer::InputDelays delays{f.input_delay_ms, slow_input ? f.slow_read_ms : 0,
                                   slow_input ? f.slow_preprocess_ms : 0};
  ring_trainer::InputPipeline input(m * m, delays, static_cast<uint32_t>(f.rank + 1), f.prefetch_batches);
  ring_trainer::RingAllReduce ring(f.rank, peers, f.connect_timeout_ms);
  std::fprintf(stderr, "ring_trainer rank %d/%d: ring formed\n", f.rank, f.world);

  const podscope::NameId matmul_name = podscope::intern("matmul");
  const int64_t flops = 2 * static_cast<int64_t>(m) * m * m;
  ModelBuffer weights(m * m, 0.01f), product(m * m);
  // Gradients, plus one float at the end: the stop vote.
  ModelBuffer grads(static_cast<size_t>(std::max<int64_t>(f.grad_bytes / 4, 1)) + 1);
  float sink = 0;
  auto window_start = std::chrono::steady_clock::now();
  double window_max_ms = 0;
  for (int64_t step = 0; f.steps == 0 || step < f.steps; ++step) {
    bool stop_all = false;
    const auto step_start = std::chrono::steady_clock::now();
    {
      auto step_span = podscope::step(step);
      StepBuffer batch;
      {
        auto in = podscope::infeed(static_cast<int64_t>(m * m * sizeof(float)));
        batch = input.next();
      }
      input.refill();
      {
        auto compute = podscope::compute(matmul_name, flops, static_cast<int64_t>(3 * m * m * sizeof(float)));
        matmul(batch.data(), weights.data(), product.data(), f.matrix);
        if (f.rank == f.straggler_rank && f.straggler_delay_ms > 0)
          sink += busy_work_for(f.straggler_delay_ms, product);
        if (const int ms = slow.delay_ms(step, f.rank); ms > 0) sink += busy_work_for(ms, product);
        for (size_t i = 0; i + 1 < grads.size(); ++i) grads[i] = product[i % product.size()] * 1e-4f;
      }
      grads.back() = g_stop.load() ? 1.0f : 0.0f;
      ring.run(grads, step);
      stop_all = grads.back() > 0.5f;
      const float scale = 1e-3f / static_cast<float>(f.world);
      for (size_t i = 0; i < weights.size(); ++i) weights[i] -= scale * grads[i % (grads.size() - 1)];
      if (f.outfeed) {
        char record[64];
        const int n =
            std::snprintf(record, sizeof(record), "step=%lld w0=%g", static_cast<long long>(step), weights[0]);
        auto out = podscope::outfeed(n);
        sink += static_cast<float>(record[0]);
      }
    }
    const auto now = std::chrono::steady_clock::now();
    window_max_ms = std::max(window_max_ms, std::chrono::duration<double, std::milli>(now - step_start).count());
    if (f.progress_every > 0 && (step + 1) % f.progress_every == 0) {
      const double ms =
          std::chrono::duration<double, std::milli>(now - window_start).count() / static_cast<double>(f.progress_every);
      std::fprintf(stderr, "ring_trainer rank %d: step %lld, %.2f ms/step, max %.2f ms, agent %s\n", f.rank,
                   static_cast<long long>(step + 1), ms, window_max_ms,
                   podscope::agent_connected() ? "connected" : "absent");
      window_start = now;
      window_max_ms = 0;
    }
    if (stop_all) {
      std::fprintf(stderr, "ring_trainer rank %d: stopping after step %lld\n", f.rank, static_cast<long long>(step));
      break;
    }
  }
  if (sink == 12345.678f) std::fprintf(stderr, " ");  // keeps the work observable to the optimizer
  podscope::shutdown();
  for (Pool pool : {Pool::kModel, Pool::kStep}) {
    const PoolStats& stats = pool_stats(pool);
    std::fprintf(stderr, "ring_trainer rank %d (pid %d): allocator %s peaked at %lld live bytes\n", f.rank,
                 static_cast<int>(::getpid()), stats.name, static_cast<long long>(stats.peak_bytes.load()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{
      "ring_trainer: a data-parallel training loop with a ring all-reduce over TCP, annotated with libpodscope"};
  app.add_option("--world", f.world, "number of ranks")->check(CLI::Range(1, 1024));
  app.add_option("--rank", f.rank, "this process's rank (its core id)")->check(CLI::NonNegativeNumber);
  app.add_option("--base_port", f.base_port, "rank r listens on 127.0.0.1:base_port+r")->check(CLI::Range(1, 65535));
  app.add_option("--peers", f.peers, "host:port of every rank, in rank order (instead of --base_port)")->delimiter(',');
  app.add_flag("--spawn", f.spawn, "start all --world ranks as child processes of this one");
  app.add_option("--agent_sockets", f.agent_sockets, "with --spawn: PODSCOPE_AGENT_SOCKET of each rank")
      ->delimiter(',');
  app.add_option("--input_delay_ms", f.input_delay_ms, "extra time the input pipeline takes per batch")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--slow_read_ms", f.slow_read_ms, "time the read stage of each batch waits")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--slow_preprocess_ms", f.slow_preprocess_ms, "time the preprocess stage of each batch waits")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--slow_input_rank", f.slow_input_rank,
                 "the only rank that --slow_read_ms and --slow_preprocess_ms slow (default: every rank)");
  app.add_option("--prefetch_batches", f.prefetch_batches,
                 "batches the input pipeline keeps ready ahead of the steps (default 0: each made when a step asks)")
      ->check(CLI::Range(0, 64));
  app.add_option("--matrix", f.matrix, "matrix size of the compute (m×m times m×m)")->check(CLI::Range(1, 8192));
  app.add_option("--grad_bytes", f.grad_bytes, "bytes all-reduced per step")
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 32));
  app.add_option("--straggler_rank", f.straggler_rank, "this rank does extra compute every step");
  app.add_option("--straggler_delay_ms", f.straggler_delay_ms, "extra compute wall time of the straggler per step")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--slow_steps", f.slow_steps, "START:COUNT:MS: steps START..START+COUNT-1 compute MS ms longer")
      ->check([&f](const std::string& spec) {
        try {
          parse_slow_steps(spec, -1);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  app.add_option("--slow_rank", f.slow_rank, "the rank --slow_steps slows (-1: every rank)");
  app.add_option("--steps", f.steps, "steps to run (0: until SIGTERM)")->check(CLI::NonNegativeNumber);
  app.add_option("--progress_every", f.progress_every, "print a progress line every N steps (0: never)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--outfeed", f.outfeed, "outfeed a small metrics record each step");
  app.add_option("--job", f.job, "job name reported to the agent");
  app.add_option("--connect_timeout_ms", f.connect_timeout_ms, "how long to wait for the ring to form")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (f.rank >= f.world) {
    std::fprintf(stderr, "ring_trainer: --rank %d must be below --world %d\n", f.rank, f.world);
    return 2;
  }
  if (f.spawn) {
    std::vector<std::string> child;
    for (int i = 0; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--spawn") continue;
      if (a == "--rank") {
        ++i;
        continue;
      }
      if (a.rfind("--rank=", 0) == 0) continue;
      child.push_back(a);
    }
    return ring_trainer::spawn_ranks(f.world, child, f.agent_sockets);
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  try {
    return train(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ring_trainer rank %d: %s\n", f.rank, e.what());
    return 3;
  }
}
