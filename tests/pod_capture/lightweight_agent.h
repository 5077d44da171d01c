// LightweightAgent: a real gRPC server on loopback speaking tensorflow.ProfilerService and podscope.v1.Agent,
// cheap enough to run hundreds in one process (callback API; one shared timer thread instead of a thread per
// call). Used by the capture-library tests and the fan-out benchmark in place of podscope-agent.
// Its clock is the system clock + `clock_offset_ns`, like podscope-agent --clock_offset_ns; it can add
// ping delays (symmetric, asymmetric, jittered) to emulate a network path.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

namespace podscope::testing {

// Runs callbacks at given CLOCK_REALTIME instants on one thread: punctually (it spins the last 200 µs before an
// instant, as an agent's capture start would), or, as a network path, sleeping until each instant: its delays then
// cost no CPU, and its wake-up latency on a loaded box is jitter, as a network's.
class TimerThread {
 public:
  enum class Wait { kPunctual, kSleeping };
  explicit TimerThread(Wait wait = Wait::kPunctual);
  ~TimerThread();
  TimerThread(const TimerThread&) = delete;
  TimerThread& operator=(const TimerThread&) = delete;
  void at(int64_t system_ns, std::function<void()> fn);

 private:
  struct Entry {
    int64_t due_ns;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Entry& o) const { return due_ns != o.due_ns ? due_ns > o.due_ns : seq > o.seq; }
  };
  void run();
  Wait wait_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  uint64_t seq_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

struct LightweightAgentOptions {
  std::string host_name = "host";
  std::string instance_id = "lightweight";  // a Ping naming it is told it matches, as podscope-agent tells its own
  // How it serves: plaintext, or TLS from tls::server_credentials.
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  int64_t clock_offset_ns = 0;
  bool ping_rpc = true;  // false: a plain TF profiler server (Ping answers UNIMPLEMENTED)
  // Emulated one-way delays of a ping (request then response path) and uniform jitter added to each, run on
  // `path_timers` where given (a sleeping TimerThread, shared by many agents: a remote agent's path costs this
  // process no CPU), else on the agent's own timers.
  TimerThread* path_timers = nullptr;
  int64_t ping_request_delay_ns = 0;
  int64_t ping_response_delay_ns = 0;
  int64_t ping_jitter_ns = 0;
  // The first `failing_profiles` Profile calls fail with UNAVAILABLE.
  int failing_profiles = 0;
  bool empty_trace = false;
  int64_t step_period_ns = 10'000'000;  // steps on the system clock's 10 ms grid, the same on every agent
};

class LightweightAgent {
 public:
  LightweightAgent(LightweightAgentOptions options, TimerThread& timers);
  ~LightweightAgent();
  LightweightAgent(const LightweightAgent&) = delete;
  LightweightAgent& operator=(const LightweightAgent&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  // Stops serving; in-flight calls are cancelled (as when the process dies).
  void shutdown();

  // System-clock time each Profile actually started (for start-skew measurements).
  std::vector<int64_t> actual_starts_system_ns() const;
  int profile_calls() const { return profile_calls_.load(); }
  int ping_calls() const { return ping_calls_.load(); }

  class Services;

 private:
  LightweightAgentOptions options_;
  TimerThread& timers_;
  std::unique_ptr<Services> services_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::atomic<int> profile_calls_{0};
  std::atomic<int> ping_calls_{0};
  mutable std::mutex mu_;
  std::vector<int64_t> actual_starts_;
  friend class Services;
};

}  // namespace podscope::testing
