// `ring_trainer --spawn`: starts every rank as a child process on this host (same arguments plus
// --rank i; PODSCOPE_AGENT_SOCKET from --agent_sockets when given), forwards SIGTERM/SIGINT to them,
// stops the rest when one fails, and exits with the worst child status.
#pragma once

#include <string>
#include <vector>

namespace ring_trainer {

int spawn_ranks(int world, const std::vector<std::string>& child_args, const std::vector<std::string>& agent_sockets);

}  // namespace ring_trainer
