// The local socket as one of the agent's lifecycle components: serves the Unix socket annotated processes
// connect to on the agent's io_context, within its limits and counting into LocalSocketCounters, and feeds the
// step batches they send, on the agent's clock, to the StepTracker (Monitor level 2), the Prometheus step
// metrics and the step observer (the flight recorder's triggers).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "daemon/lifecycle_component.h"
#include "agent/local/client_registry.h"
#include "agent/local/local_socket_counters.h"
#include "agent/local/local_socket_policy.h"
#include "agent/local/local_socket_server.h"
#include "agent/steps/step_metrics.h"
#include "agent/steps/step_tracker.h"
#include "daemon/clock.h"

namespace podscope::agent {

struct LocalSocketSettings {
  std::string path;
  std::string group;                      // the socket's group ("" keeps the agent's)
  std::vector<std::string> trusted_uids;  // as configured: numeric uids, checked by start()
  LocalSocketLimits limits;
};

class LocalSocketComponent final : public LifecycleComponent {
 public:
  // Every step of process `pid`, agent clock.
  using StepObserver = std::function<void(int32_t pid, const StepRecord& step)>;

  LocalSocketComponent(boost::asio::io_context& io, LocalSocketSettings settings, ClientRegistry& registry,
                       LocalSocketCounters& counters, const Clock& clock, StepTracker& steps, StepMetrics& step_metrics,
                       StepObserver observe_step);
  ~LocalSocketComponent() override;

  std::string_view name() const override { return "local_socket"; }
  // Claims the socket path (a stale file is removed, a live one refused) and starts serving.
  absl::Status start() override;
  // Stops the server on the io threads, bounded (1 s).
  void stop() override;

 private:
  void record_steps(int32_t pid, const std::string& job, const local::StepsMsg& steps);

  boost::asio::io_context& io_;
  LocalSocketSettings settings_;
  ClientRegistry& registry_;
  LocalSocketCounters& counters_;
  const Clock& clock_;
  StepTracker& steps_;
  StepMetrics& step_metrics_;
  StepObserver observe_step_;
  std::unique_ptr<LocalSocketServer> server_;
};

}  // namespace podscope::agent
