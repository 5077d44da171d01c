#include "tls/tls_config.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "tests/scratch_directory.h"
#include "tls/tls_metrics.h"

namespace podscope::tls {
namespace {

TEST(TlsConfig, KeysThatMeanNothingWithoutTlsAreRefused) {
  EXPECT_TRUE(check_tls_config(TlsConfig{}).ok());
  EXPECT_TRUE(check_tls_config(TlsConfig{.ca = "ca.pem"}).ok());  // a client verifying servers only
  EXPECT_TRUE(check_tls_config(TlsConfig{.cert = "c.pem",
                                         .key = "k.pem",
                                         .client_ca = "ca.pem",
                                         .allowed_clients = {"cli.example"},
                                         .plaintext_listen = "127.0.0.1:9"})
                  .ok());
  const absl::Status no_key = check_tls_config(TlsConfig{.cert = "c.pem"});
  EXPECT_EQ(no_key.message(), "tls_cert \"c.pem\" is set without tls_key");
  EXPECT_FALSE(check_tls_config(TlsConfig{.key = "k.pem"}).ok());
  EXPECT_FALSE(check_tls_config(TlsConfig{.client_ca = "ca.pem"}).ok());
  EXPECT_FALSE(check_tls_config(TlsConfig{.plaintext_listen = "127.0.0.1:9"}).ok());
  const absl::Status no_client_ca =
      check_tls_config(TlsConfig{.cert = "c.pem", .key = "k.pem", .allowed_clients = {"cli.example"}});
  EXPECT_NE(no_client_ca.message().find("allowed_clients is set without tls_client_ca"), std::string::npos);
}

TEST(TlsConfig, ServerCaDefaultsToClientCa) {
  EXPECT_EQ((TlsConfig{.client_ca = "clients.pem"}).server_ca(), "clients.pem");
  EXPECT_EQ((TlsConfig{.client_ca = "clients.pem", .ca = "servers.pem"}).server_ca(), "servers.pem");
}

TEST(TlsConfig, PlaintextListenMustBeLoopbackWhenLoaded) {
  TlsConfig config;
  OptionSet options;
  declare_tls_options(config, options, TlsRole::kDaemon);
  EXPECT_TRUE(options.apply_flag("plaintext_listen", "127.0.0.1:8467").ok());
  EXPECT_TRUE(options.apply_flag("plaintext_listen", "[::1]:8467").ok());
  EXPECT_TRUE(options.apply_flag("plaintext_listen", "localhost:8467").ok());
  const absl::Status wildcard = options.apply_flag("plaintext_listen", "0.0.0.0:8467");
  EXPECT_FALSE(wildcard.ok());
  EXPECT_NE(wildcard.message().find("plaintext_listen"), std::string::npos) << wildcard.message();
  EXPECT_NE(wildcard.message().find("0.0.0.0:8467"), std::string::npos) << wildcard.message();
  const absl::Status yaml = options.apply_yaml("plaintext_listen: 10.1.2.3:8467\n", "agent.yaml");
  EXPECT_NE(yaml.message().find("agent.yaml:1"), std::string::npos) << yaml.message();
}

TEST(TlsConfig, LoopbackAddresses) {
  EXPECT_TRUE(is_loopback_address("127.0.0.1:1"));
  EXPECT_TRUE(is_loopback_address("127.8.9.10:1"));
  EXPECT_TRUE(is_loopback_address("[::1]:1"));
  EXPECT_TRUE(is_loopback_address("localhost:1"));
  EXPECT_FALSE(is_loopback_address("0.0.0.0:1"));
  EXPECT_FALSE(is_loopback_address("[::]:1"));
  EXPECT_FALSE(is_loopback_address("128.0.0.1:1"));
  EXPECT_FALSE(is_loopback_address("node0:1"));
  EXPECT_FALSE(is_loopback_address("127.0.0.1"));
}

TEST(CertificateFiles, NotAfterIsReadFromThePemFileAndUnreadableFilesAreNamed) {
  const testing::ScratchDirectory scratch("tls");
  const std::filesystem::path& dir = scratch.path();
  const std::string make = "python3 " PODSCOPE_SOURCE_DIR "/tests/integration/test_certs.py " + dir.string();
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  absl::StatusOr<int64_t> rotated = certificate_not_after_unix_s((dir / "server_rotated.pem").string());
  ASSERT_TRUE(rotated.ok()) << rotated.status();
  EXPECT_NEAR(static_cast<double>(*rotated - now), 10 * 86400.0, 120.0);  // made with -days 10
  absl::StatusOr<int64_t> server = certificate_not_after_unix_s((dir / "server.pem").string());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_NEAR(static_cast<double>(*server - now), 30 * 86400.0, 120.0);
  EXPECT_FALSE(certificate_not_after_unix_s((dir / "server.key").string()).ok());
  EXPECT_FALSE(certificate_not_after_unix_s((dir / "absent.pem").string()).ok());
  EXPECT_TRUE(check_tls_files(TlsConfig{.cert = (dir / "server.pem").string(),
                                        .key = (dir / "server.key").string(),
                                        .client_ca = (dir / "ca.pem").string()})
                  .ok());
  const absl::Status absent =
      check_tls_files(TlsConfig{.cert = (dir / "server.pem").string(), .key = (dir / "absent.key").string()});
  EXPECT_EQ(absent.message(), "tls_key \"" + (dir / "absent.key").string() + "\": cannot be read");
}

// Writes a self-signed certificate and its key that expired a day ago (openssl's CLI makes none in the past).
void write_expired_certificate(const std::filesystem::path& cert, const std::filesystem::path& key) {
  EVP_PKEY* pkey = EVP_EC_gen("P-256");
  X509* x509 = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(x509), 4001);
  X509_gmtime_adj(X509_getm_notBefore(x509), -2 * 86400);
  X509_gmtime_adj(X509_getm_notAfter(x509), -86400);
  X509_set_pubkey(x509, pkey);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x509), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("expired"), -1, -1, 0);
  X509_set_issuer_name(x509, X509_get_subject_name(x509));
  X509_sign(x509, pkey, EVP_sha256());
  FILE* out = std::fopen(cert.c_str(), "w");
  PEM_write_X509(out, x509);
  std::fclose(out);
  out = std::fopen(key.c_str(), "w");
  PEM_write_PrivateKey(out, pkey, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(out);
  X509_free(x509);
  EVP_PKEY_free(pkey);
}

TEST(CertificateFiles, AKeyThatIsNotTheCertificatesOrAnExpiredCertificateIsRefusedBeforeServing) {
  const testing::ScratchDirectory scratch("tls_pair");
  const std::filesystem::path& dir = scratch.path();
  const std::string make = "python3 " PODSCOPE_SOURCE_DIR "/tests/integration/test_certs.py " + dir.string();
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  const absl::Status mismatched =
      check_tls_files(TlsConfig{.cert = (dir / "server.pem").string(), .key = (dir / "cli.key").string()});
  EXPECT_EQ(mismatched.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatched.message().find("is not the private key of tls_cert"), std::string::npos) << mismatched;

  write_expired_certificate(dir / "expired.pem", dir / "expired.key");
  const absl::Status expired =
      check_tls_files(TlsConfig{.cert = (dir / "expired.pem").string(), .key = (dir / "expired.key").string()});
  EXPECT_EQ(expired.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(expired.message().find("expired on"), std::string::npos) << expired;

  const absl::Status not_a_key =
      check_tls_files(TlsConfig{.cert = (dir / "server.pem").string(), .key = (dir / "ca.pem").string()});
  EXPECT_NE(not_a_key.message().find("no PEM private key"), std::string::npos) << not_a_key;
}

}  // namespace
}  // namespace podscope::tls
