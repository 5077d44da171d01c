#include "front_door/daemon_servers.h"

#include <climits>

#include "daemon/local_address.h"
#include "tls/credentials.h"

namespace podscope::front_door {
namespace {

// What a gRPC server may buffer for requests in flight (a receive limit alone still buffers the whole message
// first), and the threads it serves them on (the agent holds Monitors below this by max_concurrent_monitors, so
// a Profile always finds one).
constexpr size_t kGrpcMemoryQuotaBytes = 32u << 20;
constexpr int kGrpcMaxThreads = 64;

// "0.0.0.0:0" with the bound port 41234 → "0.0.0.0:41234".
std::string with_port(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  return (colon == std::string::npos ? address : address.substr(0, colon)) + ":" + std::to_string(port);
}

}  // namespace

DaemonServers::DaemonServers(DaemonServerSettings settings) : settings_(std::move(settings)) {}

absl::StatusOr<std::unique_ptr<DaemonServers>> DaemonServers::start(DaemonServerSettings settings, const Clock& clock,
                                                                    std::shared_ptr<prometheus::Registry> registry) {
  std::unique_ptr<DaemonServers> servers(new DaemonServers(std::move(settings)));
  const DaemonServerSettings& s = servers->settings_;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(s.listen, tls::server_credentials(s.tls), &servers->grpc_port_);
  if (!s.tls.plaintext_listen.empty()) {
    builder.AddListeningPort(s.tls.plaintext_listen, grpc::InsecureServerCredentials(), &servers->plaintext_port_);
  }
  // A second daemon on the same port must fail to start, not share the traffic (gRPC sets SO_REUSEPORT by default).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Requests are small; responses may be as large as gRPC can carry (a long capture's XSpace can pass 1 GiB).
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<size_t>(s.max_request_bytes, INT_MAX)));
  builder.SetMaxSendMessageSize(INT_MAX);
  grpc::ResourceQuota quota("podscope-grpc");
  quota.Resize(kGrpcMemoryQuotaBytes);
  quota.SetMaxThreads(kGrpcMaxThreads);
  builder.SetResourceQuota(quota);
  for (grpc::Service* service : s.services) builder.RegisterService(service);
  servers->server_ = builder.BuildAndStart();
  if (servers->server_ == nullptr || servers->grpc_port_ == 0) {
    servers->server_.reset();
    // gRPC's builder starts no server when any of its ports cannot be bound, and does not say which one.
    const std::string addresses = s.tls.plaintext_listen.empty()
                                      ? "listen " + s.listen
                                      : "listen " + s.listen + " or plaintext_listen " + s.tls.plaintext_listen;
    return absl::UnavailableError(addresses + ": cannot bind the gRPC port (in use or bad address)");
  }
  servers->tls_metrics_ =
      std::make_unique<tls::TlsMetrics>(s.tls, with_port(s.listen, servers->grpc_port_), *registry, s.labels);
  servers->self_check_ = std::make_unique<GrpcSelfCheck>(
      GrpcSelfCheck::Settings{.target = local_address(s.listen, servers->grpc_port_),
                              .credentials = tls::channel_credentials(s.tls, tls::ServerVerification::kSkipForOwnPort)},
      clock, *registry, s.labels);
  absl::StatusOr<std::unique_ptr<MetricsServer>> metrics_server =
      MetricsServer::start({.listen = s.metrics_listen, .web_config = s.metrics_web_config, .labels = s.labels},
                           registry, {servers->self_check_.get()});
  if (!metrics_server.ok()) return metrics_server.status();
  servers->metrics_server_ = std::move(*metrics_server);
  servers->self_check_->start();
  return servers;
}

DaemonServers::~DaemonServers() {
  if (self_check_ != nullptr) self_check_->stop();
  metrics_server_.reset();
  if (server_ != nullptr) {
    server_->Shutdown();  // a no-op after shutdown()
    server_->Wait();
  }
}

void DaemonServers::shutdown(std::chrono::milliseconds drain) {
  self_check_->stop();
  server_->Shutdown(std::chrono::system_clock::now() + drain);
}

std::string DaemonServers::listening() const {
  std::string out = "grpc=" + with_port(settings_.listen, grpc_port_) +
                    " metrics=" + with_port(settings_.metrics_listen, metrics_port());
  if (plaintext_port_ != 0) out += " plaintext=" + with_port(settings_.tls.plaintext_listen, plaintext_port_);
  if (settings_.tls.serves_tls()) out += " tls";
  if (metrics_server_->serves_tls()) out += " metrics_tls";
  if (metrics_server_->requires_basic_auth()) out += " metrics_basic_auth";
  return out;
}

}  // namespace podscope::front_door
