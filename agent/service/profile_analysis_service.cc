#include "agent/service/profile_analysis_service.h"

#include "daemon/grpc_status.h"
#include "daemon/log.h"
#include "tls/peer_identity.h"

namespace podscope::agent {

grpc::Status ProfileAnalysisServiceImpl::NewSession(grpc::ServerContext* context,
                                                    const tensorflow::NewProfileSessionRequest* request,
                                                    tensorflow::NewProfileSessionResponse* response) {
  if (grpc::Status allowed = authorizer_.authorize(*context, "NewSession"); !allowed.ok()) return allowed;
  absl::StatusOr<pod_capture::PodRunOutcome> outcome = sessions_.run(*request, tls::peer_certificate(*context));
  if (!outcome.ok()) {
    PODSCOPE_LOG(kWarning) << "NewSession refused: " << outcome.status().message();
    if (absl::IsPermissionDenied(outcome.status()) || absl::IsResourceExhausted(outcome.status()))
      metrics_.fanouts_refused.Increment();
    if (absl::IsFailedPrecondition(outcome.status())) {
      response->set_empty_trace(true);
      response->set_error_message(std::string(outcome.status().message()));
      return grpc::Status::OK;
    }
    return to_grpc_status(outcome.status());
  }
  metrics_.pod_sessions_served.Increment();
  pod_capture::fill_new_session_response(*outcome, *response);
  return grpc::Status::OK;
}

}  // namespace podscope::agent
