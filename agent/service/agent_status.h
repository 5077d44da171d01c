// GetStatus's answer: what every part of the agent reports (collectors, clock health, the running capture, the
// flight recorder and its snapshots, local clients and the local socket's counts, the PyTorch processes polling
// the Kineto endpoint) translated into one
// podscope.v1.AgentStatus.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "podscope/v1/agent.pb.h"
#include "daemon/clock.h"

namespace podscope::agent {

class CaptureSessions;
class ClientRegistry;
class ClockHealthCollector;
class Collector;
class FlightRecorder;
class KinetoCaptureSource;
class KinetoEndpoint;
class KinetoProcesses;
class LocalSocketCounters;
class TriggeredSnapshots;

// The parts a status is read from, as the agent holds them when it is asked.
struct AgentStatusSources {
  const std::string& host_name;
  int64_t start_time_ns;
  const Clock& clock;
  const std::vector<const Collector*>& collectors;
  const ClockHealthCollector& clock_health;
  const CaptureSessions& captures;
  const FlightRecorder& recorder;
  const TriggeredSnapshots& triggered_snapshots;
  const ClientRegistry& local_clients;
  const LocalSocketCounters& local_socket_counters;
  const KinetoEndpoint* kineto_endpoint;     // null when `kineto_endpoint` is off
  const KinetoCaptureSource* kineto_source;  // null when `kineto_endpoint` is off
  KinetoProcesses& kineto_processes;         // live() forgets the silent ones
};

void fill_agent_status(const AgentStatusSources& sources, podscope::v1::AgentStatus& status);

}  // namespace podscope::agent
