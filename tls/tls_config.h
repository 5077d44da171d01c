// TlsConfig: the transport-security keys of a daemon or the CLI, declared once for all of them. One identity
// (tls_cert, tls_key) serves both directions: the server's certificate and the client's when it calls out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/options.h"

namespace CLI {
class App;
}

namespace podscope::tls {

struct TlsConfig {
  std::string cert{};                          // PEM certificate chain of this daemon or CLI; empty: plaintext
  std::string key{};                           // its PEM private key
  std::string client_ca{};                     // servers: callers must present a certificate signed by it (mTLS)
  std::string ca{};                            // clients: verifies the servers called; empty: client_ca
  int64_t refresh_s = 5;                       // how often the files above are re-read for rotation
  std::vector<std::string> allowed_clients{};  // SAN (DNS or URI) or, without SANs, CN of who may capture
  std::string plaintext_listen{};              // loopback address of a plaintext port for TF's clients and TensorBoard

  // TLS on the server side: this daemon serves TLS on its listen address.
  bool serves_tls() const { return !cert.empty(); }
  // TLS on the client side: calls out verify the server (a CA or an identity is configured).
  bool calls_tls() const { return !cert.empty() || !ca.empty() || !client_ca.empty(); }
  // The CA that verifies servers: ca, else client_ca.
  const std::string& server_ca() const { return ca.empty() ? client_ca : ca; }
};

// Which keys a program takes: a daemon serves and calls out (every key); the CLI only calls out.
enum class TlsRole { kDaemon, kClient };

// Declares the keys of `role` on `options`, writing into `config`.
void declare_tls_options(TlsConfig& config, OptionSet& options, TlsRole role);
// The client keys as flags of a `podscope` command (--tls_cert, --tls_key, --tls_ca).
void add_tls_flags(CLI::App& command, TlsConfig& config);

// Checks that the keys go together: a cert needs its key and the reverse; client_ca, allowed_clients and
// plaintext_listen need a cert (they mean nothing without TLS); allowed_clients needs client_ca (only a
// certificate names a caller); plaintext_listen must be a loopback address.
absl::Status check_tls_config(const TlsConfig& config);
// Checks that every file the config names can be read, that tls_key is tls_cert's private key and that tls_cert has
// not expired: gRPC's watcher would only log a failure and fail the handshakes, so daemons (at start and at a
// reload) and the CLI check them before they listen or dial (a rotation later replaces them).
absl::Status check_tls_files(const TlsConfig& config);

// True for "127.0.0.1:P", "127.x.y.z:P", "[::1]:P" and "localhost:P".
bool is_loopback_address(const std::string& address);

}  // namespace podscope::tls
