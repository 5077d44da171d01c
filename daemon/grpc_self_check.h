// The loopback self-check of a daemon's own gRPC server. Every period it opens a fresh connection (a channel with
// its own subchannel, so the server's listener has to accept it) and calls grpc.health.v1.Health/Check (the server
// registers GrpcHealthService) with a short deadline. gRPC 1.51's listener stops accepting for good after an accept
// error other than EINTR/EAGAIN (EMFILE once the fds run out) while the connections it already has keep working, so
// only a new connection notices. The result is a /healthz check and, after `failures_to_wedge` failures in a row,
// `wedged()`: the daemon stops its systemd watchdog pings and is restarted.
#pragma once

#include <chrono>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/status/status.h"
#include "daemon/clock.h"
#include "daemon/health_check.h"

namespace podscope {

class GrpcSelfCheck : public HealthCheck {
 public:
  struct Settings {
    std::string target;  // the server as a local client reaches it (local_address())
    // How the check dials: the daemon's own TLS identity when its port serves TLS (tls::channel_credentials).
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    std::chrono::milliseconds period{10'000};   // a check costs a connection: well under 0.1 % of a core
    std::chrono::milliseconds deadline{2'000};  // a healthy loopback answer takes about a millisecond
    int failures_to_wedge = 3;                  // one slow answer on a loaded host is not a wedge
  };

  // `labels` go on the check's metrics (podscope_grpc_self_check_*).
  GrpcSelfCheck(Settings settings, const Clock& clock, prometheus::Registry& registry,
                const prometheus::Labels& labels);
  ~GrpcSelfCheck() override;
  GrpcSelfCheck(const GrpcSelfCheck&) = delete;
  GrpcSelfCheck& operator=(const GrpcSelfCheck&) = delete;

  // Checks every period on a thread of its own, the first one period after the start.
  void start();
  // Ends the thread; a check in flight is cancelled.
  void stop();
  // One check now, recorded like the periodic ones; its result.
  absl::Status check_now();

  // Failed `failures_to_wedge` times in a row, and not passed since.
  bool wedged() const;
  std::string_view name() const override { return "grpc_self_check"; }
  std::optional<HealthFailure> failure() const override;

 private:
  absl::Status call_health_check();
  void record(const absl::Status& result);
  void run();

  const Settings settings_;
  const Clock& clock_;
  prometheus::Counter& failures_total_;
  prometheus::Gauge& passing_;

  mutable std::mutex mutex_;  // guards what follows
  int consecutive_failures_ = 0;
  std::optional<HealthFailure> failure_;
  grpc::ClientContext* in_flight_ = nullptr;  // cancelled by stop()
  bool stopping_ = false;
  std::condition_variable wake_;

  std::thread thread_;
};

}  // namespace podscope
