#include "agent/service/agent_service.h"

namespace podscope::agent {

AgentServiceImpl::AgentServiceImpl(const Clock& clock, std::function<void(podscope::v1::AgentStatus&)> fill_status)
    : clock_(clock), fill_status_(std::move(fill_status)) {}

grpc::Status AgentServiceImpl::Ping(grpc::ServerContext*, const podscope::v1::PingRequest* request,
                                    podscope::v1::PingResponse* response) {
  const int64_t received = clock_.now_ns();
  response->set_client_send_ns(request->client_send_ns());
  response->set_server_receive_ns(received);
  response->set_server_send_ns(clock_.now_ns());
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::GetStatus(grpc::ServerContext*, const podscope::v1::StatusRequest*,
                                         podscope::v1::AgentStatus* response) {
  fill_status_(*response);
  response->set_now_ns(clock_.now_ns());
  return grpc::Status::OK;
}

}  // namespace podscope::agent
