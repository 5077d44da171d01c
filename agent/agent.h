// Agent: owns everything podscope-agent runs — the shared parts (io_context, series store, sampler, capture
// sessions, Prometheus registry) and every component of the table in components.cc, built from an
// AgentConfig — and runs them: gRPC server and its loopback self-check, metrics server (/metrics, /healthz),
// sampling, threaded collectors, lifecycle components. agent_main.cc only parses options, builds an Agent, starts it
// and relays signals.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "agent/agent_config.h"
#include "agent/components.h"
#include "front_door/daemon_servers.h"

namespace podscope::agent {

class ThreadedCollectorRunner;

class Agent {
 public:
  explicit Agent(const AgentConfig& config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Binds the gRPC and metrics ports, starts sampling, the io threads and the lifecycle components, and logs
  // "podscope-agent listening grpc=HOST:PORT metrics=HOST:PORT".
  absl::Status start();
  // Ends a running capture (it is answered), stops everything and releases the ports; bounded (< 3 s).
  void shutdown();
  // Puts in force the changed options declared Reload::kApplied (log level, sampling period, capture limits,
  // repository root); refuses every other change with a warning naming the option, and counts it.
  void reload(const AgentConfig& config);
  // A reload whose config is invalid: the running config stays; logged with the reason and counted.
  void refuse_reload(std::string_view reason);
  // Schedules `tick` every `period` on the io_context (the systemd watchdog: a stuck loop stops the pings).
  void every(std::chrono::milliseconds period, std::function<void()> tick);

  // The gRPC port failed its loopback self-check several times in a row (it no longer accepts connections): the
  // systemd watchdog pings stop so the agent is restarted.
  bool grpc_wedged() const { return servers_ != nullptr && !servers_->serving(); }

  int grpc_port() const { return parts_.grpc_port; }
  int metrics_port() const { return servers_ != nullptr ? servers_->metrics_port() : 0; }

 private:
  void build(const ComponentEntry& entry);
  // Removes the temporary files of writes under repository_root that a crash or kill cut off, counted.
  void sweep_repository();
  absl::Status start_servers();

  AgentParts parts_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::vector<std::unique_ptr<Collector>> collectors_;  // sampled on the pass, in table order
  std::vector<std::unique_ptr<ThreadedCollectorRunner>> threaded_;
  std::vector<std::unique_ptr<CaptureSource>> sources_;
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::vector<std::unique_ptr<LifecycleComponent>> lifecycle_;
  std::unique_ptr<front_door::DaemonServers> servers_;
  std::vector<std::thread> io_threads_;
  struct PeriodicTask;
  std::vector<std::unique_ptr<PeriodicTask>> periodic_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace podscope::agent
