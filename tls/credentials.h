// The one place that turns a TlsConfig into gRPC credentials: every server and every channel of the daemons and
// the CLI is built from these (gRPC 1.51's TlsServerCredentials and TlsCredentials, its channel side).
// Certificates come from gRPC's file watcher, which re-reads the files every refresh_s: a rotated certificate is
// served (and presented) without a restart.
#pragma once

#include <memory>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "tls/tls_config.h"

namespace podscope::tls {

// TLS with the config's identity (and, with client_ca, callers must present a certificate signed by it);
// plaintext when no certificate is configured.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const TlsConfig& config);

// Whether a channel verifies the server's certificate (chain to server_ca() and the address dialled). Only a
// daemon's self-check of its own port skips it: it dials its own loopback address, which the certificate need not
// name, signed by a CA the daemon need not hold (a server without tls_client_ca). It still presents the identity.
enum class ServerVerification { kVerify, kSkipForOwnPort };

// TLS verifying servers with server_ca() and presenting the identity when one is configured; plaintext when
// nothing TLS is configured.
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(
    const TlsConfig& config, ServerVerification verification = ServerVerification::kVerify);

}  // namespace podscope::tls
