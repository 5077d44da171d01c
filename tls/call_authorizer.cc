#include "tls/call_authorizer.h"

#include "daemon/log.h"
#include "tls/peer_identity.h"

namespace podscope::tls {

CallAuthorizer::CallAuthorizer(const TlsConfig& config, prometheus::Registry& registry,
                               const prometheus::Labels& labels)
    : tls_on_(config.serves_tls()),
      allowed_clients_(config.allowed_clients),
      refused_(prometheus::BuildCounter()
                   .Name("podscope_grpc_calls_refused_total")
                   .Help("Capturing gRPC calls refused because the caller is not in allowed_clients, by method")
                   .Labels(labels)
                   .Register(registry)) {}

grpc::Status CallAuthorizer::authorize(const grpc::ServerContextBase& context, std::string_view method) {
  const PeerCertificate peer = peer_certificate(context);
  // Without TLS nobody is named: the call is plaintext, as before TLS existed.
  const std::string identity = tls_on_ ? peer_identity(peer) : "unauthenticated (TLS off)";
  if (tls_on_ && !caller_allowed(peer, allowed_clients_)) {
    refused_.Add({{"method", std::string(method)}}).Increment();
    PODSCOPE_LOG(kWarning) << "refused " << method << " from " << identity << " (" << context.peer()
                           << "): not in allowed_clients";
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        std::string(method) + ": caller \"" + identity + "\" is not in allowed_clients");
  }
  PODSCOPE_LOG(kInfo) << "audit: " << method << " by " << identity << " (" << context.peer() << ")";
  return grpc::Status::OK;
}

}  // namespace podscope::tls
