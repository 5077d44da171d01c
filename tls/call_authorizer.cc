#include "tls/call_authorizer.h"

#include <optional>

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

namespace {

// The caller an authenticated agent says it acts for (kOnBehalfOfMetadata), if it says one.
std::optional<std::string> on_behalf_of(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kOnBehalfOfMetadata);
  if (it == metadata.end()) return std::nullopt;
  return std::string(it->second.data(), it->second.size());
}

}  // namespace

grpc::Status CallAuthorizer::authorize(const grpc::ServerContextBase& context, std::string_view method, Audit audit) {
  const PeerCertificate peer = peer_certificate(context);
  // Without TLS nobody is named: the call is plaintext, as before TLS existed.
  std::string identity = tls_on_ ? peer_identity(peer) : "unauthenticated (TLS off)";
  bool allowed = !tls_on_ || caller_allowed(peer, allowed_clients_);
  // An agent fanning out for its caller names it: that caller must be allowed here too, as if it called itself.
  if (const std::optional<std::string> forwarded = on_behalf_of(context); forwarded && tls_on_ && peer.over_tls) {
    const PeerCertificate original = forwarded_certificate(*forwarded);
    identity = peer_identity(original) + " via " + identity;
    allowed = allowed && original.over_tls && caller_allowed(original, allowed_clients_);
  }
  if (!allowed) {
    refused_.Add({{"method", std::string(method)}}).Increment();
    PODSCOPE_LOG(kWarning) << "refused " << method << " from " << identity << " (" << context.peer()
                           << "): not in allowed_clients";
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        std::string(method) + ": caller \"" + identity + "\" is not in allowed_clients");
  }
  if (audit == Audit::kLine) {
    PODSCOPE_LOG(kInfo) << "audit: " << method << " by " << identity << " (" << context.peer() << ")";
  }
  return grpc::Status::OK;
}

std::string CallAuthorizer::owner_of(const grpc::ServerContextBase& context) const {
  if (tls_on_) return peer_identity(peer_certificate(context));
  // gRPC names a peer "ipv4:10.0.0.5:41234", "ipv6:[::1]:41234" or "unix:...".
  std::string peer = context.peer();
  if (const size_t colon = peer.rfind(':'); peer.starts_with("ipv") && colon != std::string::npos) peer.resize(colon);
  if (const size_t scheme = peer.find(':'); peer.starts_with("ipv") && scheme != std::string::npos) {
    peer.erase(0, scheme + 1);
  }
  return "address " + peer;
}

}  // namespace podscope::tls
