// The PyTorch (Kineto) processes that poll the agent's IPC fabric endpoint, verified (process_lineage.h), and the
// trace requests waiting for their next poll. A process is known by its first poll and forgotten after
// kForgetAfterNs of silence, as dynolog forgets it; at most kMaxProcessesPerUid of one uid and kMaxProcesses in
// all are known at once (a poll from one more is answered empty and counted), so that no user's processes take
// every place. A trace request is handed once, at the process's next poll, then withdrawn.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "agent/kineto/process_lineage.h"
#include "kineto/ipc/fabric_message.h"

namespace podscope::agent {

struct KinetoProcess {
  int32_t pid = 0;      // in the agent's pid namespace
  int32_t own_pid = 0;  // in its own (a container's): the pid Kineto puts in its trace file's name
  uint32_t uid = 0;
  int64_t job_id = 0;
  std::vector<int32_t> ancestors;  // parent first, in the agent's pid namespace, as the kernel has them
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

// Why a poll was answered empty and its process not recorded.
enum class PollRefusal : uint8_t {
  kNone,
  kProcessCap,  // kMaxProcesses are known
  kUidCap,      // kMaxProcessesPerUid of its uid are known
};

class KinetoProcesses {
 public:
  static constexpr int64_t kForgetAfterNs = int64_t{60} * 1'000'000'000;
  static constexpr size_t kMaxProcesses = 4096;
  // A node's ranks, their DataLoader workers (spawned workers import torch and poll too) and launchers, with room.
  static constexpr size_t kMaxProcessesPerUid = 256;
  // Kineto's default poll interval (ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS), assumed until a process has polled
  // twice.
  static constexpr int64_t kDefaultPollIntervalNs = int64_t{5} * 1'000'000'000;
  // The longest poll interval a capture waits for: twice Kineto's default. A process polling less often (or one
  // that says so to push every capture's start away) is not waited for; its trace is missed, and said so.
  static constexpr int64_t kMaxAwaitedPollIntervalNs = int64_t{10} * 1'000'000'000;

  // A verified process's poll at `now_ns`: records the process and returns the config text to answer with
  // (empty: none). `refused` says why a process was not recorded.
  std::string on_poll(const VerifiedSender& sender, const kineto::ipc::Poll& poll, int64_t now_ns,
                      PollRefusal& refused);
  // A verified registration: records the process's GPU; answers the number of known processes of its job on that
  // GPU.
  int32_t on_registration(const VerifiedSender& sender, const kineto::ipc::Registration& registration);

  // The processes that polled within kForgetAfterNs of `now_ns`; the others are forgotten.
  std::vector<KinetoProcess> live(int64_t now_ns);
  // The longest poll interval among the live processes (kDefaultPollIntervalNs for one not yet measured), at
  // most kMaxAwaitedPollIntervalNs; 0 when none is live.
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
  std::map<uint32_t, size_t> per_uid_;  // known processes of each uid
  std::map<int32_t, Request> requests_;
};

}  // namespace podscope::agent
