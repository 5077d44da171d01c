#include "tls/peer_identity.h"

#include <algorithm>

#include <grpc/grpc_security_constants.h>
#include <grpcpp/server_context.h>

namespace podscope::tls {

std::vector<std::string> certificate_names(const PeerCertificate& peer) {
  if (!peer.sans.empty()) return peer.dns_and_uri;
  if (!peer.common_name.empty()) return {peer.common_name};
  return {};
}

std::string peer_identity(const PeerCertificate& peer) {
  if (!peer.over_tls) return kLocalPlaintextIdentity;
  std::string out;
  for (const std::string& name : certificate_names(peer)) out += (out.empty() ? "" : ",") + name;
  if (!out.empty()) return out;
  return peer.sans.empty() && peer.common_name.empty() ? "no certificate" : "a certificate without DNS or URI name";
}

bool caller_allowed(const PeerCertificate& peer, const std::vector<std::string>& allowed_clients) {
  if (!peer.over_tls || allowed_clients.empty()) return true;
  const std::vector<std::string> names = certificate_names(peer);
  return std::any_of(names.begin(), names.end(), [&allowed_clients](const std::string& name) {
    return std::find(allowed_clients.begin(), allowed_clients.end(), name) != allowed_clients.end();
  });
}

std::string forwarded_identity(const PeerCertificate& peer) {
  if (!peer.over_tls) return kLocalPlaintextIdentity;
  std::string out = "tls:";
  bool first = true;
  for (const std::string& name : certificate_names(peer)) {
    if (!first) out += ',';
    first = false;
    for (char c : name) out += (c > ' ' && c < 0x7f && c != ',') ? c : '?';
  }
  return out;
}

PeerCertificate forwarded_certificate(std::string_view value) {
  PeerCertificate peer;
  if (!value.starts_with("tls:")) return peer;
  peer.over_tls = true;
  value.remove_prefix(4);
  while (!value.empty()) {
    const size_t comma = value.find(',');
    peer.dns_and_uri.emplace_back(value.substr(0, comma));
    value.remove_prefix(comma == std::string_view::npos ? value.size() : comma + 1);
  }
  peer.sans = peer.dns_and_uri;
  return peer;
}

PeerCertificate peer_certificate(const grpc::ServerContextBase& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  PeerCertificate peer;
  if (auth == nullptr) return peer;
  const auto values = [&auth](const char* property) {
    std::vector<std::string> out;
    for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
      out.emplace_back(value.data(), value.size());
    }
    return out;
  };
  const std::vector<std::string> transport = values(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  // TlsServerCredentials name their transport "tls", the older SslServerCredentials "ssl".
  peer.over_tls = !transport.empty() && (transport.front() == GRPC_TLS_TRANSPORT_SECURITY_TYPE ||
                                         transport.front() == GRPC_SSL_TRANSPORT_SECURITY_TYPE);
  peer.sans = values(GRPC_X509_SAN_PROPERTY_NAME);
  peer.dns_and_uri = values(GRPC_PEER_DNS_PROPERTY_NAME);
  for (std::string& uri : values(GRPC_PEER_URI_PROPERTY_NAME)) peer.dns_and_uri.push_back(std::move(uri));
  const std::vector<std::string> common_name = values(GRPC_X509_CN_PROPERTY_NAME);
  if (!common_name.empty()) peer.common_name = common_name.front();
  return peer;
}

}  // namespace podscope::tls
