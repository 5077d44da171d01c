#include "tests/integration/agent_process.h"

#include "podscope/v1/agent.grpc.pb.h"
#include "tensorflow/profiler_service.grpc.pb.h"
#include "tests/http_client.h"

namespace podscope::testing {

std::string http_get(int port, const std::string& path) {
  HttpResponse response = http_fetch(port, path);
  if (response.status != 200) {
    throw std::runtime_error("HTTP " + std::to_string(response.status) + " for " + path + ": " + response.body);
  }
  return std::move(response.body);
}

tensorflow::ProfileRequest profile_request(uint64_t duration_ms, const std::string& session) {
  tensorflow::ProfileRequest request;
  request.set_duration_ms(duration_ms);
  request.set_session_id(session);
  request.set_emit_xspace(true);
  return request;
}

ProfileOutcome profile(const AgentProcess& agent, const tensorflow::ProfileRequest& request,
                       std::chrono::seconds deadline) {
  auto stub = tensorflow::ProfilerService::NewStub(agent.channel());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  ProfileOutcome out;
  out.status = stub->Profile(&context, request, &out.response);
  return out;
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

bool kineto_pollers_known(const AgentProcess& agent, int processes) {
  const podscope::v1::AgentStatus status = agent_status(agent);
  if (status.kineto().processes_size() != processes) return false;
  for (const auto& process : status.kineto().processes()) {
    if (process.poll_interval_ms() == 0) return false;
  }
  return true;
}

}  // namespace podscope::testing
