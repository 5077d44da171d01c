// The metrics server's TLS and basic authentication (option metrics_web_config): a file in the web-config format of
// Prometheus's exporter-toolkit, the one node_exporter reads with --web.config.file, so that one file and one scrape
// config serve podscope and the exporters beside it:
//
//   tls_server_config:
//     cert_file: agent.pem                        # relative paths are relative to this file's folder
//     key_file: agent.key
//     client_auth_type: RequireAndVerifyClientCert
//     client_ca_file: ca.pem
//   basic_auth_users:
//     prometheus: $2y$10$...                      # bcrypt (htpasswd -nBC 10 "" | tr -d ':\n')
//
// tls_server_config takes cert_file, key_file, client_auth_type, client_ca_file, client_allowed_sans, min_version
// and max_version with the format's meanings and defaults; the format's other keys (inline cert/key/client_ca,
// cipher_suites, curve_preferences, prefer_server_cipher_suites, http_server_config, rate_limit) are refused by name,
// as unknown keys are, so that no setting in the file is silently ignored. The checks are the format's own: a cert
// needs its key, client_ca_file needs a client_auth_type that asks for a certificate, client_allowed_sans one that
// requires it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "absl/status/statusor.h"

namespace podscope {

// crypto/tls's ClientAuthType, as the format names them.
enum class ClientAuth {
  kNoClientCert,
  kRequestClientCert,          // asked for, neither required nor verified
  kRequireAnyClientCert,       // required, not verified
  kVerifyClientCertIfGiven,    // verified when one is sent
  kRequireAndVerifyClientCert  // required and verified: the only one that authenticates the scraper
};

struct MetricsTlsSettings {
  std::string cert_file{};       // PEM certificate (chain) served
  std::string key_file{};        // its PEM private key
  std::string client_ca_file{};  // PEM CA certificate(s) client certificates are verified against
  ClientAuth client_auth = ClientAuth::kNoClientCert;
  std::vector<std::string> client_allowed_sans{};  // a client certificate must carry one of them (DNS, IP, email, URI)
  int min_version = 0x0303;                        // TLS protocol versions (0x0303: TLS 1.2)
  int max_version = 0x0304;
};

// Bcrypt costs above this are refused: a check takes about 1 s at 14 (each doubling per step), and a stop waits for
// the check in progress.
inline constexpr int kMaxBcryptCost = 14;

struct MetricsWebConfig {
  std::string path{};                                     // the file it was read from
  std::optional<MetricsTlsSettings> tls{};                // nullopt: plain HTTP
  std::map<std::string, std::string> basic_auth_users{};  // user → bcrypt hash; empty: no authentication

  // The file and the files it names: a change to any of them is a new configuration.
  std::vector<std::string> files() const;
};

// Reads and checks `path`; an error names the file, and the line and key where there is one.
absl::StatusOr<MetricsWebConfig> read_metrics_web_config(const std::string& path);

// A TLS server context of `tls`: its certificate and key loaded (and checked to be a pair), the client certificate
// policy set. An error names the file that could not be used.
absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> make_tls_context(const MetricsTlsSettings& tls);

}  // namespace podscope
