// Who a gRPC caller is, from what its TLS handshake proved, and whether it may capture. Pure: the names come in as
// values (peer_certificate() reads them from a call), so the matching is tested on its own.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace grpc {
class ServerContextBase;
}

namespace podscope::tls {

// What the handshake of one connection proved about the caller.
struct PeerCertificate {
  bool over_tls = false;                   // false: a plaintext port (no certificate can be had)
  std::vector<std::string> sans{};         // every subject alternative name (DNS, URI, IP, email)
  std::vector<std::string> dns_and_uri{};  // the DNS and URI ones among them
  std::string common_name{};               // the subject's CN
};

// The identity a call on a plaintext port is given: only loopback callers reach one while TLS is on.
inline constexpr char kLocalPlaintextIdentity[] = "local plaintext";

// The names an allowed_clients entry is compared with: the certificate's DNS and URI SANs, or its CN when it has
// no SAN at all (a certificate with only IP SANs has no name to match).
std::vector<std::string> certificate_names(const PeerCertificate& peer);

// The caller as logs and refusals name it: its names joined by ',', kLocalPlaintextIdentity on a plaintext port,
// "no certificate" over TLS without one.
std::string peer_identity(const PeerCertificate& peer);

// Whether the caller may make a capturing call. A plaintext port's caller is the node itself and may; over TLS,
// any certificate when `allowed_clients` is empty, else one of its names must equal an entry.
bool caller_allowed(const PeerCertificate& peer, const std::vector<std::string>& allowed_clients);

// The call metadata under which an agent that fans out for a caller (NewSession) names that caller to the agents it
// dials, so they decide on, and audit, the caller who asked. Only a caller that TLS authenticated is believed.
inline constexpr char kOnBehalfOfMetadata[] = "podscope-on-behalf-of";

// `peer` as kOnBehalfOfMetadata carries it: "tls:" and its certificate names joined by ',' ("tls:" alone when it has
// none), or kLocalPlaintextIdentity. Printable ASCII only, as metadata must be.
std::string forwarded_identity(const PeerCertificate& peer);
// The caller a kOnBehalfOfMetadata value names: its certificate names, or a caller without a certificate.
PeerCertificate forwarded_certificate(std::string_view value);

// What the handshake of `context`'s connection proved.
PeerCertificate peer_certificate(const grpc::ServerContextBase& context);

}  // namespace podscope::tls
