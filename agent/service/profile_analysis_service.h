// tensorflow.ProfileAnalysis on the agent: NewSession, TensorBoard's worker-list capture, through PodSessions, gated by
// allowed_clients.
// Translating only: target policy, confinement and the pod run live in agent/capture/pod_sessions.h.
#pragma once

#include "agent/capture/pod_sessions.h"
#include "agent/service/agent_metrics.h"
#include "tls/call_authorizer.h"
#include "tensorflow/profiler_analysis.grpc.pb.h"

namespace podscope::agent {

class ProfileAnalysisServiceImpl final : public tensorflow::ProfileAnalysis::Service {
 public:
  ProfileAnalysisServiceImpl(PodSessions& sessions, RequestMetrics& metrics, tls::CallAuthorizer& authorizer)
      : sessions_(sessions), metrics_(metrics), authorizer_(authorizer) {}

  // A refusal is a gRPC error, except a missing repository root: the request is sound and the answer's
  // error_message says how to enable it (empty_trace set, so TensorFlow's client does not report success).
  grpc::Status NewSession(grpc::ServerContext* context, const tensorflow::NewProfileSessionRequest* request,
                          tensorflow::NewProfileSessionResponse* response) override;

 private:
  PodSessions& sessions_;
  RequestMetrics& metrics_;
  tls::CallAuthorizer& authorizer_;
};

}  // namespace podscope::agent
