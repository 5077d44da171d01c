// Plugs the local-client half into the agent (called from Agent::install_extensions): the Unix-socket
// server as a component, the LocalClientsSource for captures, the per-process collector, step batches
// into the StepTracker and the Prometheus step metrics, and the registered clients into AgentStatus.
#pragma once

namespace podscope::agent {

class Agent;
void install_local_clients(Agent& agent);

}  // namespace podscope::agent
