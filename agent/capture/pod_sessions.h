// TensorBoard's worker-list capture served by an agent (tensorflow.ProfileAnalysis/NewSession, which TensorFlow's
// client sends to the first worker of the list with every worker as a host): the hosts are captured as one pod run
// (pod_capture::run_pod: clock sync, synchronized start, merged outputs, analysis) into
// <repository_root>/<session_id>/ inside the agent's configured root. Only hosts that FanoutTargets allows are
// contacted, at most max_hosts of them, and only for a caller that could have called them itself: over TLS, the
// workers are told who asked (tls::kOnBehalfOfMetadata) and decide on that caller; a caller without a certificate
// (the loopback plaintext port) may capture only this agent. One pod session at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/security/credentials.h>

#include "absl/status/statusor.h"
#include "agent/capture/repository_quota.h"
#include "daemon/clock.h"
#include "pod_capture/pod_run.h"
#include "tensorflow/profiler_analysis.pb.h"
#include "tls/peer_identity.h"

namespace podscope::agent {

class PodSessions {
 public:
  // `repository_root` and `own_grpc_port` are read at each request: a reload changes the root, and the port is
  // bound after the services are built. `allowed_targets` as check_fanout_patterns accepts them. The workers are
  // dialled with `credentials` (the agent's own TLS identity when TLS is on).
  // `tls_on`: this agent serves TLS (its callers are named by their certificates).
  // The runs are charged to `quota` (the agent's, shared with Profile's files).
  PodSessions(const Clock& clock, std::function<std::string()> repository_root, std::function<int()> own_grpc_port,
              std::vector<std::string> allowed_targets, size_t max_hosts, bool tls_on,
              std::shared_ptr<grpc::ChannelCredentials> credentials, RepositoryQuota& quota);

  // Errors, with nothing contacted: PERMISSION_DENIED (a host outside allowed_fanout_targets: names it and the
  // patterns; or another host for a caller without a certificate while TLS is on), INVALID_ARGUMENT (no hosts, a
  // malformed address or one that does not resolve, a session id that is no plain name, a repository path outside
  // the root), RESOURCE_EXHAUSTED (more hosts than max_fanout_hosts, or repository_quota_mb reached),
  // FAILED_PRECONDITION (the agent has no repository root: says how to give it one), ALREADY_EXISTS (another pod
  // session is running). Otherwise the pod run, as run_pod returns it. `caller` is who asked, as its handshake proved.
  absl::StatusOr<pod_capture::PodRunOutcome> run(const tensorflow::NewProfileSessionRequest& request,
                                                 const tls::PeerCertificate& caller);
  // Ends the running pod session at once (its calls are cancelled; it answers CANCELLED) and refuses new ones: the
  // agent stops.
  void stop() { stopping_.cancel(); }

 private:
  // One request host, resolved and allowed: its name as listed and the address dialled.
  struct Target {
    std::string address;
    std::string dial;
  };
  // The request's hosts, parsed, bounded in number, resolved and checked against the patterns and the caller.
  absl::StatusOr<std::vector<Target>> targets(const tensorflow::NewProfileSessionRequest& request,
                                              const tls::PeerCertificate& caller) const;
  // The channel credentials that carry `caller` to the workers.
  std::shared_ptr<grpc::ChannelCredentials> credentials_for(const tls::PeerCertificate& caller) const;
  absl::StatusOr<std::string> run_directory(const tensorflow::NewProfileSessionRequest& request,
                                            const std::string& session_id) const;

  const Clock& clock_;
  std::function<std::string()> repository_root_;
  std::function<int()> own_grpc_port_;
  std::vector<std::string> allowed_targets_;
  size_t max_hosts_;
  bool tls_on_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  RepositoryQuota& quota_;
  std::mutex running_;
  pod_capture::Cancellation stopping_;
};

}  // namespace podscope::agent
