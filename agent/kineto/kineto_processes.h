// The PyTorch (Kineto) processes that poll the agent's IPC fabric endpoint, and the trace requests waiting for
// their next poll. A process is known by its first poll and forgotten after kForgetAfterNs of silence, as
// dynolog forgets it; at most kMaxProcesses are known at once (a poll from one more is answered empty and
// counted). A trace request is handed once, at the process's next poll, then withdrawn.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kineto/ipc/fabric_message.h"

namespace podscope::agent {

struct KinetoProcess {
  int32_t pid = 0;
  int64_t job_id = 0;
  std::vector<int32_t> ancestors;  // parent first, as Kineto lists them
  int32_t gpu = -1;                // from its registration; -1: none (CPU-only processes do not register)
  int64_t first_poll_ns = 0;       // agent clock
  int64_t last_poll_ns = 0;
  int64_t poll_interval_ns = 0;  // the last gap between two polls; 0 until it has polled twice
};

// Where a trace request stands for one process.
enum class TraceHandoff {
  kWaiting,  // not yet polled for
  kHanded,   // handed at a poll
  kUnknown,  // no request for this process
};

class KinetoProcesses {
 public:
  static constexpr int64_t kForgetAfterNs = int64_t{60} * 1'000'000'000;
  static constexpr size_t kMaxProcesses = 4096;
  // Kineto's default poll interval (ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS), assumed until a process has polled
  // twice.
  static constexpr int64_t kDefaultPollIntervalNs = int64_t{5} * 1'000'000'000;

  // A poll at `now_ns`: records the process and returns the config text to answer with (empty: none).
  // `refused_at_cap` is set when the process was not recorded because kMaxProcesses are known.
  std::string on_poll(const kineto::ipc::Poll& poll, int64_t now_ns, bool& refused_at_cap);
  // A registration: records the process's GPU; answers the number of known processes of its job on that GPU.
  int32_t on_registration(const kineto::ipc::Registration& registration);

  // The processes that polled within kForgetAfterNs of `now_ns`; the others are forgotten.
  std::vector<KinetoProcess> live(int64_t now_ns);
  // The longest poll interval among the live processes (kDefaultPollIntervalNs for one not yet measured); 0
  // when none is live.
  int64_t longest_poll_interval_ns(int64_t now_ns);

  // Queues `config_text` for process `pid`, replacing any request it has not yet been handed.
  void request_trace(int32_t pid, std::string config_text);
  TraceHandoff handoff(int32_t pid) const;
  // Drops every request, handed or not.
  void withdraw_all();

 private:
  void forget_silent(int64_t now_ns);

  struct Request {
    std::string config_text;
    bool handed = false;
  };

  mutable std::mutex mu_;
  std::map<int32_t, KinetoProcess> processes_;
  std::map<int32_t, Request> requests_;
};

}  // namespace podscope::agent
