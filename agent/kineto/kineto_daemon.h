// The agent's end of dynolog's IPC fabric, as a lifecycle component: serves `kineto_endpoint` on a thread of
// its own, answers every poll and registration of PyTorch's Kineto from KinetoProcesses, and counts what it
// refuses. A taken endpoint (dynolog running on the host) or a bad one leaves the agent running: status says
// why nothing is served.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
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
#include "agent/lifecycle_component.h"
#include "daemon/clock.h"
#include "kineto/ipc/fabric_endpoint.h"
#include "kineto/ipc/fabric_message.h"

namespace podscope::agent {

// What the daemon refuses, by reason: the codec's refusals, then a poll from one process more than
// KinetoProcesses::kMaxProcesses.
inline constexpr size_t kKinetoRefusalCount = kineto::ipc::kRefusals.size() + 1;
inline constexpr std::string_view kProcessCapRefusal = "process_cap";

struct KinetoEndpointStatus {
  std::string endpoint;  // as configured; empty: off
  enum class State { kOff, kServing, kUnavailable } state = State::kOff;
  std::string detail;  // what is served, or why nothing is
  uint64_t polls = 0;
  uint64_t registrations = 0;
  uint64_t unanswered = 0;  // answers that could not be sent (the process gone, its socket full)
  std::vector<std::pair<std::string, uint64_t>> refused;  // by reason, every reason listed
};

class KinetoDaemon final : public LifecycleComponent {
 public:
  KinetoDaemon(std::string endpoint, std::shared_ptr<KinetoProcesses> processes, const Clock& clock,
               prometheus::Registry& registry, const std::string& host_name);
  ~KinetoDaemon() override;

  std::string_view name() const override { return "kineto_endpoint"; }
  // Binds the endpoint and starts serving; never fails the agent (see status()).
  absl::Status start() override;
  void stop() override;

  KinetoEndpointStatus status() const;

 private:
  void serve(kineto::ipc::FabricEndpoint endpoint);
  void handle(const kineto::ipc::FabricEndpoint& endpoint, const kineto::ipc::Datagram& datagram);
  void refuse(size_t reason);
  // The per-process gauges follow the live processes.
  void publish_processes();

  std::string endpoint_;
  std::shared_ptr<KinetoProcesses> processes_;
  const Clock& clock_;
  std::string host_name_;

  prometheus::Counter& polls_;
  prometheus::Counter& registrations_;
  prometheus::Counter& unanswered_;
  std::array<prometheus::Counter*, kKinetoRefusalCount> refused_{};
  prometheus::Gauge& process_count_;
  prometheus::Family<prometheus::Gauge>& last_poll_family_;
  std::map<int32_t, std::pair<std::string, prometheus::Gauge*>> last_poll_;  // pid → (labels key, gauge)

  mutable std::mutex mu_;
  KinetoEndpointStatus::State state_ = KinetoEndpointStatus::State::kOff;
  std::string detail_;

  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace podscope::agent
