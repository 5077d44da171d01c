// Everything podscope-agent runs, as one table (components.cc) that the Agent builds in order: collectors
// on the sampling pass, collectors on threads of their own, capture sources, gRPC services and lifecycle
// components. Each entry names a component, says what it is and makes it from the AgentParts: the agent's
// config and shared parts, plus what earlier entries left there for later ones (the CPU collector for
// Monitor, the device-utilization sources, every collector for status and capture warnings).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <grpcpp/security/credentials.h>
#include <grpcpp/impl/service_type.h>
#include <prometheus/registry.h>

#include "agent/agent_config.h"
#include "agent/capture/capture_source.h"
#include "agent/collectors/collector.h"
#include "agent/devices/device_utilization.h"
#include "daemon/lifecycle_component.h"
#include "agent/steps/step_tracker.h"
#include "daemon/clock.h"
#include "tls/call_authorizer.h"

namespace podscope::agent {

class CaptureSessions;
struct CaptureLimits;
class ClientRegistry;
class ClockHealthCollector;
class CpuCollector;
class FlightRecorder;
class KinetoCaptureSource;
class KinetoEndpoint;
class KinetoProcesses;
class LocalSocketCounters;
class PodSessions;
class RepositoryQuota;
class Sampler;
class SeriesStore;
class StepMetrics;
class TriggeredSnapshots;
struct RequestMetrics;

// The capture limits a configuration sets, at start and on every reload.
CaptureLimits capture_limits(const AgentConfig& config);

struct AgentParts {
  explicit AgentParts(const AgentConfig& config);
  ~AgentParts();

  AgentConfig config;  // reload() updates the keys that change live
  std::string host_name;
  // Random, chosen at start and never told: the coordinator calls a registered address back to check that the
  // agent there is the instance that registered (Ping's instance_id).
  std::string instance_id;
  Clock clock;
  int64_t start_time_ns;
  boost::asio::io_context io;
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<SeriesStore> series;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<RequestMetrics> request_metrics;
  std::unique_ptr<RepositoryQuota> repository_quota;  // what clients' captures and pod runs wrote under the root
  std::unique_ptr<CaptureSessions> captures;
  StepTracker step_tracker;
  std::shared_ptr<ClientRegistry> local_clients;
  std::unique_ptr<LocalSocketCounters> local_socket_counters;
  std::unique_ptr<StepMetrics> step_metrics;
  std::shared_ptr<KinetoProcesses> kineto_processes;   // polling PyTorch processes: the endpoint's and captures'
  std::unique_ptr<FlightRecorder> recorder;            // made by its entry, after the collectors
  TriggeredSnapshots* triggered_snapshots = nullptr;   // made by its entry, after the recorder's
  const KinetoEndpoint* kineto_endpoint = nullptr;     // made by its entry, for status
  const KinetoCaptureSource* kineto_source = nullptr;  // made by its entry, for status
  std::unique_ptr<PodSessions> pod_sessions;           // made with the ProfileAnalysis service
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;  // every call out: coordinator, NewSession's agents
  std::unique_ptr<tls::CallAuthorizer> authorizer;                // allowed_clients, for the capturing calls
  int grpc_port = 0;  // bound by Agent::start() before the lifecycle components start

  // Left by the entries for later ones.
  std::vector<const Collector*> collectors;  // every collector, pass and threaded, in table order
  const CpuCollector* cpu = nullptr;
  const ClockHealthCollector* clock_health = nullptr;
  std::vector<const DeviceUtilizationSource*> device_utilization;  // in table order: Monitor's preference
};

// A collector on a thread and period of its own: its source can block.
struct ThreadedCollector {
  std::unique_ptr<Collector> collector;
  std::chrono::milliseconds period;
};

// The factories, one type per kind of component. A null result means "not configured" (no --upstream, no
// --coordinator) and the entry is skipped.
using MakePassCollectors = std::vector<std::unique_ptr<Collector>> (*)(AgentParts& parts);
using MakeThreadedCollector = ThreadedCollector (*)(AgentParts& parts);
using MakeCaptureSource = std::unique_ptr<CaptureSource> (*)(AgentParts& parts);
using MakeGrpcService = std::unique_ptr<grpc::Service> (*)(AgentParts& parts);
using MakeLifecycleComponent = std::unique_ptr<LifecycleComponent> (*)(AgentParts& parts);

struct ComponentEntry {
  std::string_view name;
  std::string_view what;
  std::variant<MakePassCollectors, MakeThreadedCollector, MakeCaptureSource, MakeGrpcService, MakeLifecycleComponent>
      make;
};

// The table, in build order.
std::span<const ComponentEntry> agent_components();

}  // namespace podscope::agent
