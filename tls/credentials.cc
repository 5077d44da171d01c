#include "tls/credentials.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

namespace podscope::tls {
namespace {

std::shared_ptr<grpc::experimental::CertificateProviderInterface> file_watcher(const std::string& key,
                                                                               const std::string& cert,
                                                                               const std::string& root,
                                                                               int64_t refresh_s) {
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(key, cert, root,
                                                                              static_cast<unsigned>(refresh_s));
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> server_credentials(const TlsConfig& config) {
  if (!config.serves_tls()) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(
      file_watcher(config.key, config.cert, config.client_ca, config.refresh_s));
  options.watch_identity_key_cert_pairs();
  if (config.client_ca.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const TlsConfig& config,
                                                              ServerVerification verification) {
  if (!config.calls_tls()) return grpc::InsecureChannelCredentials();
  const bool verify = verification == ServerVerification::kVerify;
  grpc::experimental::TlsChannelCredentialsOptions options;
  const std::string root = verify ? config.server_ca() : std::string();
  if (!root.empty() || !config.cert.empty()) {
    options.set_certificate_provider(file_watcher(config.key, config.cert, root, config.refresh_s));
  }
  if (!root.empty()) options.watch_root_certs();  // else the system's roots
  if (!config.cert.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(verify);
  if (!verify) {
    options.set_certificate_verifier(std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
    options.set_check_call_host(false);
  }
  return grpc::experimental::TlsCredentials(options);
}

}  // namespace podscope::tls
