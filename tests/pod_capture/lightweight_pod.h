// A pod of lightweight agents (real gRPC servers on loopback), each with its connection, for pod-capture tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pod_capture/agent_connection.h"
#include "pod_capture/pod_run.h"
#include "tests/pod_capture/lightweight_agent.h"

namespace podscope::testing {

struct LightweightPod {
  TimerThread timers;
  std::vector<std::unique_ptr<LightweightAgent>> agents;
  std::vector<std::unique_ptr<pod_capture::AgentConnection>> connections;
  std::vector<pod_capture::PodAgent> members;  // as the registry would describe them to run_pod

  void add(LightweightAgentOptions options, std::string known_name = "", double drift_ppm = 0) {
    agents.push_back(std::make_unique<LightweightAgent>(std::move(options), timers));
    connections.push_back(pod_capture::connect_agent(agents.back()->address(), grpc::InsecureChannelCredentials()));
    members.push_back({connections.back().get(), std::move(known_name), drift_ppm});
  }
  std::vector<pod_capture::AgentConnection*> targets() {
    std::vector<pod_capture::AgentConnection*> out;
    for (auto& c : connections) out.push_back(c.get());
    return out;
  }
};

}  // namespace podscope::testing
