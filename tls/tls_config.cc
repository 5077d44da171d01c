#include "tls/tls_config.h"

#include <arpa/inet.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

namespace podscope::tls {
namespace {

constexpr char kCertHelp[] =
    "PEM certificate (chain) of this program, served to callers and presented when calling out; empty: plaintext";
constexpr char kKeyHelp[] = "PEM private key of tls_cert";
constexpr char kCaHelp[] =
    "PEM CA certificate(s) that verify the servers called (default: tls_client_ca; without "
    "either, the system's CAs)";

}  // namespace

void declare_tls_options(TlsConfig& c, OptionSet& o, TlsRole role) {
  o.add_string("tls_cert", &c.cert, kCertHelp);
  o.add_string("tls_key", &c.key, kKeyHelp);
  o.add_string("tls_ca", &c.ca, kCaHelp);
  if (role == TlsRole::kClient) return;
  o.add_string("tls_client_ca", &c.client_ca,
               "PEM CA certificate(s) callers must present a certificate signed by (mutual TLS; empty: callers are "
               "not asked for one)");
  o.add_int("tls_refresh_s", &c.refresh_s,
            "seconds between re-reads of the TLS files: a rotated certificate is served within this, no restart", 1,
            3600);
  o.add_list("allowed_clients", &c.allowed_clients,
             "DNS or URI SANs (or CN, for a certificate without SANs) of the callers that may capture (Profile, "
             "Monitor, NewSession, Capture, the continuous-profiling and recorded-window calls); empty: any caller "
             "with a certificate of tls_client_ca. Needs tls_client_ca");
  o.add_string("plaintext_listen", &c.plaintext_listen,
               "loopback address of a second, plaintext gRPC port with the same services, for TensorFlow's clients "
               "and TensorBoard on this node (they speak no TLS); callers on it are trusted as the node itself");
  o.add_check("plaintext_listen", [&c]() -> absl::Status {
    if (c.plaintext_listen.empty() || is_loopback_address(c.plaintext_listen)) return absl::OkStatus();
    return absl::InvalidArgumentError("\"" + c.plaintext_listen +
                                      "\" is not a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT): "
                                      "plaintext is only served to this node");
  });
}

void add_tls_flags(CLI::App& command, TlsConfig& config) {
  command.add_option("--tls_cert", config.cert, kCertHelp);
  command.add_option("--tls_key", config.key, kKeyHelp);
  command.add_option("--tls_ca", config.ca, kCaHelp);
}

absl::Status check_tls_config(const TlsConfig& c) {
  if (c.cert.empty() != c.key.empty()) {
    return absl::InvalidArgumentError(c.cert.empty() ? "tls_key \"" + c.key + "\" is set without tls_cert"
                                                     : "tls_cert \"" + c.cert + "\" is set without tls_key");
  }
  if (c.cert.empty()) {
    if (!c.client_ca.empty()) return absl::InvalidArgumentError("tls_client_ca is set without tls_cert and tls_key");
    if (!c.allowed_clients.empty()) {
      return absl::InvalidArgumentError("allowed_clients is set without TLS (tls_cert, tls_key, tls_client_ca)");
    }
    if (!c.plaintext_listen.empty()) {
      return absl::InvalidArgumentError("plaintext_listen \"" + c.plaintext_listen +
                                        "\" is set without TLS: listen is plaintext already");
    }
  }
  if (!c.allowed_clients.empty() && c.client_ca.empty()) {
    return absl::InvalidArgumentError("allowed_clients is set without tls_client_ca: callers present no certificate");
  }
  return absl::OkStatus();
}

namespace {

// The certificate is in force and `key_path` holds its private key: else every handshake would fail, and a
// peer's error would be all that says why.
absl::Status check_key_pair(const std::string& cert_path, const std::string& key_path) {
  const auto read = [](const std::string& path, auto reader) {
    FILE* file = std::fopen(path.c_str(), "r");
    if (file == nullptr) return decltype(reader(file))(nullptr);
    auto* object = reader(file);
    std::fclose(file);
    return object;
  };
  X509* cert = read(cert_path, [](FILE* f) { return PEM_read_X509(f, nullptr, nullptr, nullptr); });
  if (cert == nullptr) return absl::InvalidArgumentError("tls_cert \"" + cert_path + "\": no PEM certificate");
  EVP_PKEY* key = read(key_path, [](FILE* f) { return PEM_read_PrivateKey(f, nullptr, nullptr, nullptr); });
  absl::Status status = absl::OkStatus();
  if (key == nullptr) {
    status = absl::InvalidArgumentError("tls_key \"" + key_path + "\": no PEM private key");
  } else if (X509_check_private_key(cert, key) != 1) {
    status = absl::InvalidArgumentError("tls_key \"" + key_path + "\" is not the private key of tls_cert \"" +
                                        cert_path + "\"");
  } else if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    BIO* text = BIO_new(BIO_s_mem());
    ASN1_TIME_print(text, X509_get0_notAfter(cert));
    char* data = nullptr;
    const long length = BIO_get_mem_data(text, &data);
    status = absl::InvalidArgumentError("tls_cert \"" + cert_path + "\" expired on " +
                                        std::string(data, static_cast<size_t>(length)));
    BIO_free(text);
  }
  EVP_PKEY_free(key);
  X509_free(cert);
  ERR_clear_error();
  return status;
}

}  // namespace

absl::Status check_tls_files(const TlsConfig& c) {
  for (const auto& [key, path] : {std::pair{"tls_cert", &c.cert}, std::pair{"tls_key", &c.key},
                                  std::pair{"tls_client_ca", &c.client_ca}, std::pair{"tls_ca", &c.ca}}) {
    if (path->empty()) continue;
    std::ifstream file(*path);
    std::string first_line;
    if (!std::getline(file, first_line)) {
      return absl::InvalidArgumentError(std::string(key) + " \"" + *path + "\": cannot be read");
    }
  }
  if (c.cert.empty() || c.key.empty()) return absl::OkStatus();
  return check_key_pair(c.cert, c.key);
}

bool is_loopback_address(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = address.substr(0, colon);
  if (host == "localhost") return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    in6_addr v6{};
    return inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
  }
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

}  // namespace podscope::tls
