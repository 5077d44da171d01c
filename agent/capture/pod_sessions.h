// TensorBoard's worker-list capture served by an agent (tensorflow.ProfileAnalysis/NewSession, which TensorFlow's
// client sends to the first worker of the list with every worker as a host): the hosts are captured as one pod run
// (pod_capture::run_pod: clock sync, synchronized start, merged outputs, analysis) into
// <repository_root>/<session_id>/ inside the agent's configured root. Only hosts that FanoutTargets allows are
// contacted; one pod session at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/security/credentials.h>

#include "absl/status/statusor.h"
#include "daemon/clock.h"
#include "pod_capture/pod_run.h"
#include "tensorflow/profiler_analysis.pb.h"

namespace podscope::agent {

class PodSessions {
 public:
  // `repository_root` and `own_grpc_port` are read at each request: a reload changes the root, and the port is
  // bound after the services are built. `allowed_targets` as check_fanout_patterns accepts them. The workers are
  // dialled with `credentials` (the agent's own TLS identity when TLS is on).
  PodSessions(const Clock& clock, std::function<std::string()> repository_root, std::function<int()> own_grpc_port,
              std::vector<std::string> allowed_targets, std::shared_ptr<grpc::ChannelCredentials> credentials);

  // Errors, with nothing contacted: PERMISSION_DENIED (a host outside allowed_fanout_targets: names it and the
  // patterns), INVALID_ARGUMENT (no hosts, a malformed address, a session id that is no plain name, a repository
  // path outside the root), FAILED_PRECONDITION (the agent has no repository root: says how to give it one),
  // ALREADY_EXISTS (another pod session is running). Otherwise the pod run, as run_pod returns it.
  absl::StatusOr<pod_capture::PodRunOutcome> run(const tensorflow::NewProfileSessionRequest& request);

 private:
  // The request's hosts as addresses to dial: "grpc://" stripped, this agent's port added to a bare host name.
  absl::StatusOr<std::vector<std::string>> target_addresses(const tensorflow::NewProfileSessionRequest& request) const;
  absl::StatusOr<std::string> run_directory(const tensorflow::NewProfileSessionRequest& request,
                                            const std::string& session_id) const;

  const Clock& clock_;
  std::function<std::string()> repository_root_;
  std::function<int()> own_grpc_port_;
  std::vector<std::string> allowed_targets_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::mutex running_;
};

}  // namespace podscope::agent
