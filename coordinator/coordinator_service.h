// podscope.v1.Coordinator and tensorflow.ProfileAnalysis on the coordinator: registration and heartbeats
// into the WorkerRegistry; captures of a selection of workers through the capture library, one at a time.
// Thin: validation and translation only.
#pragma once

#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "coordinator/capture_runner.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/registration_check.h"
#include "coordinator/worker_registry.h"
#include "daemon/clock.h"
#include "pod_capture/pod_run.h"
#include "run_directory/run_directory.h"
#include "podscope/v1/coordinator.grpc.pb.h"
#include "tensorflow/profiler_analysis.grpc.pb.h"
#include "tls/call_authorizer.h"

namespace podscope::coordinator {

struct CoordinatorSettings {
  // Where captures are kept (<root>/plugins/profile/<run>) and the only tree NewSession may write into.
  std::filesystem::path repository_root;
  int64_t heartbeat_interval_ms = 5000;
  int clock_sync_pings = 16;
  bool tls_on = false;  // callers are named by their certificates; else by their addresses
  // Who may forget any worker's name besides the identity that registered it: certificate names (as
  // allowed_clients matches them) with TLS, caller addresses without.
  std::vector<std::string> registry_admins;
};

class PodSnapshots;

class CoordinatorService final : public podscope::v1::Coordinator::Service {
 public:
  // `on_register` runs after each registration (the daemon measures the new worker's clock at once); a
  // registration is taken only once `check` found the agent at its address to be the one registering, and refused
  // registrations are counted in `metrics`. Trigger reports go to `pod_snapshots`. Every call passes `authorizer`
  // (allowed_clients, so the agents' certificates must be in it); a worker's name belongs to the caller that
  // registered it (tls::CallAuthorizer::owner_of), and only that caller heartbeats or reports triggers for it; only
  // that caller (with TLS: without it, the agent instance is the owner and calls no ForgetWorker) or one in
  // settings.registry_admins forgets it.
  CoordinatorService(WorkerRegistry& registry, CaptureRunner& runner, const CoordinatorSettings& settings,
                     const Clock& clock, CoordinatorMetrics& metrics, PodSnapshots& pod_snapshots,
                     tls::CallAuthorizer& authorizer, RegistrationCheck& check, std::function<void()> on_register = {})
      : registry_(registry),
        runner_(runner),
        settings_(settings),
        clock_(clock),
        metrics_(metrics),
        pod_snapshots_(pod_snapshots),
        authorizer_(authorizer),
        check_(check),
        on_register_(std::move(on_register)) {}

  grpc::Status Register(grpc::ServerContext* context, const podscope::v1::RegisterRequest* request,
                        podscope::v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const podscope::v1::HeartbeatRequest* request,
                         podscope::v1::HeartbeatResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context, const podscope::v1::ListWorkersRequest*,
                           podscope::v1::ListWorkersResponse* response) override;
  grpc::Status ForgetWorker(grpc::ServerContext* context, const podscope::v1::ForgetWorkerRequest* request,
                            podscope::v1::ForgetWorkerResponse* response) override;
  grpc::Status Capture(grpc::ServerContext* context, const podscope::v1::CaptureRequest* request,
                       grpc::ServerWriter<podscope::v1::CaptureChunk>* writer) override;
  grpc::Status ReportTrigger(grpc::ServerContext* context, const podscope::v1::TriggerReport* request,
                             podscope::v1::TriggerReportResponse* response) override;

 private:
  // Whether the caller is in settings_.registry_admins.
  bool is_registry_admin(const grpc::ServerContext& context) const;

  WorkerRegistry& registry_;
  CaptureRunner& runner_;
  const CoordinatorSettings& settings_;
  const Clock& clock_;
  CoordinatorMetrics& metrics_;
  PodSnapshots& pod_snapshots_;
  tls::CallAuthorizer& authorizer_;
  RegistrationCheck& check_;
  std::function<void()> on_register_;
};

// tensorflow.ProfileAnalysis/NewSession: TensorBoard's worker-list capture mode. Hosts are worker host names
// or addresses (as registered); files go to <repository_root>/<session_id>/ inside the configured root.
class ProfileAnalysisService final : public tensorflow::ProfileAnalysis::Service {
 public:
  ProfileAnalysisService(WorkerRegistry& registry, CaptureRunner& runner, const CoordinatorSettings& settings,
                         const Clock& clock, tls::CallAuthorizer& authorizer)
      : registry_(registry), runner_(runner), settings_(settings), clock_(clock), authorizer_(authorizer) {}

  grpc::Status NewSession(grpc::ServerContext* context, const tensorflow::NewProfileSessionRequest* request,
                          tensorflow::NewProfileSessionResponse* response) override;

 private:
  WorkerRegistry& registry_;
  CaptureRunner& runner_;
  const CoordinatorSettings& settings_;
  const Clock& clock_;
  tls::CallAuthorizer& authorizer_;
};

// Resolves a client-given directory against the configured root; an error when it would leave the root.
absl::StatusOr<std::filesystem::path> confine_to_root(const std::filesystem::path& root, const std::string& requested);

}  // namespace podscope::coordinator
