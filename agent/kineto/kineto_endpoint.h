// The agent's end of dynolog's IPC fabric, as a lifecycle component: serves `kineto_endpoint` on a thread of
// its own, answers every poll and registration of PyTorch's Kineto from KinetoProcesses, and counts what it
// refuses. A datagram is taken as its sender's only: the kernel names the sender (process_lineage.h), and a
// payload that claims another process, or an ancestor the sender does not have, is dropped unanswered. A taken
// endpoint (dynolog running on the host) or a bad one leaves the agent running: status says why nothing is
// served. Its metrics have no per-process label: their series are as many whatever polls.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "agent/kineto/kineto_processes.h"
#include "daemon/lifecycle_component.h"
#include "daemon/clock.h"
#include "kineto/ipc/fabric_endpoint.h"
#include "kineto/ipc/fabric_message.h"

namespace podscope::agent {

// What the endpoint refuses, by reason: the codec's refusals, the lies (process_lineage.h), then a poll from one
// process more than KinetoProcesses::kMaxProcesses or kMaxProcessesPerUid.
inline constexpr std::array<std::string_view, 5> kKinetoEndpointRefusals = {
    "unverified", "forged_pid", "forged_ancestor", "process_cap", "uid_cap"};
inline constexpr size_t kKinetoRefusalCount = kineto::ipc::kRefusals.size() + kKinetoEndpointRefusals.size();

struct KinetoEndpointStatus {
  std::string endpoint;  // as configured; empty: off
  enum class State { kOff, kServing, kUnavailable } state = State::kOff;
  std::string detail;  // what is served, or why nothing is
  uint64_t polls = 0;
  uint64_t registrations = 0;
  uint64_t unanswered = 0;  // answers that could not be sent (the process gone, its socket full)
  std::vector<std::pair<std::string, uint64_t>> refused;  // by reason, every reason listed
};

class KinetoEndpoint final : public LifecycleComponent {
 public:
  KinetoEndpoint(std::string endpoint, std::shared_ptr<KinetoProcesses> processes, const Clock& clock,
                 prometheus::Registry& registry, const std::string& host_name);
  ~KinetoEndpoint() override;

  std::string_view name() const override { return "kineto_endpoint"; }
  // Binds the endpoint and starts serving; never fails the agent (see status()).
  absl::Status start() override;
  void stop() override;

  KinetoEndpointStatus status() const;

 private:
  void serve(kineto::ipc::FabricEndpoint endpoint);
  void handle(const kineto::ipc::FabricEndpoint& endpoint, const kineto::ipc::Datagram& datagram);
  void refuse(std::string_view reason);

  std::string endpoint_;
  std::shared_ptr<KinetoProcesses> processes_;
  const Clock& clock_;
  std::string host_name_;

  prometheus::Counter& polls_;
  prometheus::Counter& registrations_;
  prometheus::Counter& unanswered_;
  std::array<prometheus::Counter*, kKinetoRefusalCount> refused_{};
  prometheus::Gauge& process_count_;

  mutable std::mutex mu_;
  KinetoEndpointStatus::State state_ = KinetoEndpointStatus::State::kOff;
  std::string detail_;

  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace podscope::agent
