#include "tests/integration/agent_process.h"

#include <cstdio>

#include "podscope/v1/agent.grpc.pb.h"
#include "tests/http_client.h"

namespace podscope::testing {

std::string http_get(int port, const std::string& path) {
  HttpResponse response = http_fetch(port, path);
  if (response.status != 200) {
    throw std::runtime_error("HTTP " + std::to_string(response.status) + " for " + path + ": " + response.body);
  }
  return std::move(response.body);
}

CommandResult run_command(const std::string& command) {
  CommandResult result{-1, {}};
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) result.output.append(buf, n);
  const int status = pclose(p);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::optional<podscope::v1::AgentStatus> try_agent_status(const AgentProcess& agent) {
  auto stub = podscope::v1::Agent::NewStub(agent.channel());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  podscope::v1::AgentStatus status;
  if (!stub->GetStatus(&context, podscope::v1::StatusRequest(), &status).ok()) return std::nullopt;
  return status;
}

podscope::v1::AgentStatus agent_status(const AgentProcess& agent) {
  std::optional<podscope::v1::AgentStatus> status = try_agent_status(agent);
  if (!status) throw std::runtime_error("GetStatus failed:\n" + agent.output());
  return std::move(*status);
}

}  // namespace podscope::testing
