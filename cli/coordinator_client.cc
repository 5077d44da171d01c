#include "cli/coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include "pod_capture/agent_connection.h"
#include "podscope/v1/coordinator.grpc.pb.h"
#include "tls/credentials.h"

namespace podscope::cli {

absl::StatusOr<podscope::v1::ListWorkersResponse> list_workers(const std::string& coordinator,
                                                               const tls::TlsConfig& tls,
                                                               std::chrono::seconds deadline) {
  const std::string address = pod_capture::strip_grpc_scheme(coordinator);
  auto stub = podscope::v1::Coordinator::NewStub(grpc::CreateChannel(address, tls::channel_credentials(tls)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  podscope::v1::ListWorkersResponse response;
  const grpc::Status status = stub->ListWorkers(&context, podscope::v1::ListWorkersRequest(), &response);
  if (!status.ok()) {
    return absl::UnavailableError("coordinator " + address + " unreachable: " + status.error_message());
  }
  return response;
}

}  // namespace podscope::cli
