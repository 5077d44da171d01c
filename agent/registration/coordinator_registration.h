// The agent's side of podscope-coordinator: registers (host name, the address its gRPC services answer on,
// job), then heartbeats at the interval the coordinator asks for; registers again when the coordinator
// says it does not know the agent (it restarted) or after a failed heartbeat. Never blocks the agent:
// one thread of its own, stopped promptly. Also tells the coordinator of each triggered snapshot.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>

#include "daemon/lifecycle_component.h"
#include "podscope/v1/coordinator.grpc.pb.h"

namespace podscope::agent {

struct RegistrationSettings {
  std::string coordinator;  // host:port
  std::string host_name;
  std::string job;
  // The agent's instance id (new_instance_id): the coordinator lets only this instance move its worker's address,
  // and checks, by calling the registered address back, that the agent there is this instance.
  std::string instance_id;
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // tls::channel_credentials of the agent's config
  // Called at start(): the agent's ports are bound by then.
  std::function<std::string()> advertised_address;
  int64_t retry_interval_ms = 1000;
};

class CoordinatorRegistration final : public LifecycleComponent {
 public:
  // How long a registration may take: the coordinator calls the agent back before it answers.
  static constexpr std::chrono::seconds kRegisterTimeout{5};
  static constexpr std::chrono::seconds kHeartbeatTimeout{2};

  explicit CoordinatorRegistration(RegistrationSettings settings);
  ~CoordinatorRegistration() override { stop(); }

  std::string_view name() const override { return "coordinator registration"; }
  absl::Status start() override;
  void stop() override;

  // Reports a triggered snapshot (host_name filled in); at most 2 s, on the caller's thread. Safe after stop().
  void report_trigger(podscope::v1::TriggerReport report);

 private:
  void run(std::string address);
  RegistrationSettings settings_;
  const std::unique_ptr<podscope::v1::Coordinator::Stub> stub_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  grpc::ClientContext* in_flight_ = nullptr;  // the call under way, cancelled by stop()
  std::thread thread_;
};

// 128 random bits as hex: an agent's instance id, chosen when it starts.
std::string new_instance_id();

// The address to advertise for `listen` bound on `port`: its host, or `host_name` when it listens on all
// interfaces (0.0.0.0, [::], or empty).
std::string advertised_agent_address(const std::string& listen, int port, const std::string& host_name);

}  // namespace podscope::agent
