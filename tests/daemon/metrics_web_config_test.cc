#include "daemon/metrics_web_config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/scratch_directory.h"

namespace podscope {
namespace {

// A bcrypt hash of cost 10 (of "podscope", by libxcrypt).
constexpr char kHash[] = "$2y$10$rahWy/xMd4x.ptsm8FVXDe454ATaqv4a2QZw8fFoRLln7.D/vY312";

class MetricsWebConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text, const std::string& name = "web.yml") {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string error_of(const std::string& text) {
    absl::StatusOr<MetricsWebConfig> config = read_metrics_web_config(write(text));
    return config.ok() ? "" : std::string(config.status().message());
  }
  // The test certificates (tests/integration/test_certs.py) in dir_/certs.
  std::filesystem::path certs() {
    const std::filesystem::path out = dir_ / "certs";
    const std::string make = "python3 " PODSCOPE_SOURCE_DIR "/tests/integration/test_certs.py " + out.string();
    if (std::system(make.c_str()) != 0) throw std::runtime_error("test_certs.py failed");
    return out;
  }

  const testing::ScratchDirectory scratch_{"web_config"};
  const std::filesystem::path& dir_ = scratch_.path();
};

TEST_F(MetricsWebConfigTest, ReadsTheFormatsKeysWithPathsRelativeToTheFile) {
  const std::string path = write(std::string("tls_server_config:\n"
                                             "  cert_file: agent.pem\n"
                                             "  key_file: /abs/agent.key\n"
                                             "  client_auth_type: RequireAndVerifyClientCert\n"
                                             "  client_ca_file: ca/ca.pem\n"
                                             "  client_allowed_sans: [prometheus.example.org, 10.0.0.1]\n"
                                             "  min_version: TLS13\n"
                                             "basic_auth_users:\n"
                                             "  alice: ") +
                                 kHash + "\n  bob: '" + kHash + "'\n");
  absl::StatusOr<MetricsWebConfig> config = read_metrics_web_config(path);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->tls.has_value());
  EXPECT_EQ(config->tls->cert_file, (dir_ / "agent.pem").string());
  EXPECT_EQ(config->tls->key_file, "/abs/agent.key");
  EXPECT_EQ(config->tls->client_ca_file, (dir_ / "ca/ca.pem").string());
  EXPECT_EQ(config->tls->client_auth, ClientAuth::kRequireAndVerifyClientCert);
  EXPECT_EQ(config->tls->client_allowed_sans, (std::vector<std::string>{"prometheus.example.org", "10.0.0.1"}));
  EXPECT_EQ(config->tls->min_version, 0x0304);
  EXPECT_EQ(config->tls->max_version, 0x0304);
  EXPECT_EQ(config->basic_auth_users, (std::map<std::string, std::string>{{"alice", kHash}, {"bob", kHash}}));
  EXPECT_EQ(config->files(), (std::vector<std::string>{path, (dir_ / "agent.pem").string(), "/abs/agent.key",
                                                       (dir_ / "ca/ca.pem").string()}));
}

TEST_F(MetricsWebConfigTest, AnEmptyFileOrTlsSectionMeansPlainHttpWithoutUsers) {
  for (const std::string text : {"", "tls_server_config: {}\n", "basic_auth_users:\n"}) {
    absl::StatusOr<MetricsWebConfig> config = read_metrics_web_config(write(text));
    ASSERT_TRUE(config.ok()) << text << ": " << config.status();
    EXPECT_FALSE(config->tls.has_value()) << text;
    EXPECT_TRUE(config->basic_auth_users.empty()) << text;
  }
}

TEST_F(MetricsWebConfigTest, KeysThatDoNotGoTogetherAreRefusedAsTheFormatRefusesThem) {
  const std::string file = (dir_ / "web.yml").string();
  EXPECT_EQ(error_of("tls_server_config:\n  key_file: a.key\n"), file + ": tls_server_config: cert_file is missing");
  EXPECT_EQ(error_of("tls_server_config:\n  cert_file: a.pem\n"), file + ": tls_server_config: key_file is missing");
  EXPECT_EQ(error_of("tls_server_config:\n  cert_file: a.pem\n  key_file: a.key\n  client_ca_file: ca.pem\n"),
            file +
                ": tls_server_config: client_ca_file is set without a client_auth_type that asks for a "
                "certificate (RequireAndVerifyClientCert authenticates scrapers)");
  EXPECT_EQ(error_of("tls_server_config:\n  cert_file: a.pem\n  key_file: a.key\n"
                     "  client_auth_type: RequireAndVerifyClientCert\n"),
            file +
                ": tls_server_config: client_auth_type RequireAndVerifyClientCert verifies client certificates: "
                "it needs client_ca_file");
  EXPECT_EQ(error_of("tls_server_config:\n  cert_file: a.pem\n  key_file: a.key\n"
                     "  client_auth_type: RequestClientCert\n  client_allowed_sans: [x]\n"),
            file +
                ": tls_server_config: client_allowed_sans needs client_auth_type RequireAnyClientCert or "
                "RequireAndVerifyClientCert");
  EXPECT_EQ(error_of("tls_server_config:\n  cert_file: a.pem\n  key_file: a.key\n  min_version: TLS13\n"
                     "  max_version: TLS12\n"),
            file + ": tls_server_config: min_version is above max_version");
}

TEST_F(MetricsWebConfigTest, UnknownUnsupportedAndMalformedKeysNameTheLine) {
  const std::string file = (dir_ / "web.yml").string();
  EXPECT_EQ(error_of("tls_config:\n  cert_file: a\n"), file + ":1: tls_config: unknown key");
  EXPECT_EQ(error_of("rate_limit:\n  burst: 2\n"), file + ":1: rate_limit: is not supported by podscope");
  EXPECT_EQ(error_of("tls_server_config:\n  cert_file: a.pem\n  cipher_suites: [X]\n"),
            file + ":3: tls_server_config.cipher_suites: is not supported by podscope");
  EXPECT_EQ(error_of("tls_server_config:\n  cert_file: a.pem\n  cert_file: b.pem\n"),
            file + ":3: tls_server_config.cert_file: duplicate key");
  EXPECT_EQ(error_of("tls_server_config:\n  cert_file: a.pem\n  key_file: a.key\n  client_auth_type: Yes\n"),
            file +
                ":4: tls_server_config.client_auth_type: \"Yes\" is not NoClientCert, RequestClientCert, "
                "RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert");
  EXPECT_EQ(error_of("tls_server_config:\n  cert_file: a.pem\n  key_file: a.key\n  min_version: SSL3\n"),
            file + ":4: tls_server_config.min_version: \"SSL3\" is not TLS10, TLS11, TLS12 or TLS13");
  EXPECT_EQ(error_of("tls_server_config: [a]\n"), file + ":1: tls_server_config: expected a map");
  EXPECT_EQ(error_of("basic_auth_users:\n  alice: [a]\n"),
            file + ":2: basic_auth_users.alice: expected a single value");
  EXPECT_EQ(error_of("basic_auth_users: {a: b\n"), error_of("basic_auth_users: {a: b\n"));  // stable, and an error
  EXPECT_NE(error_of("basic_auth_users: {a: b\n").find(file + ":"), std::string::npos);
}

TEST_F(MetricsWebConfigTest, UsersNeedABcryptHashOfABoundedCost) {
  const std::string file = (dir_ / "web.yml").string();
  const std::string not_bcrypt = "is not a bcrypt hash ($2a$, $2b$ or $2y$, as htpasswd -B writes)";
  EXPECT_EQ(error_of("basic_auth_users:\n  alice: s3cret\n"), file + ":2: basic_auth_users.alice: " + not_bcrypt);
  // Another crypt scheme (SHA-512) is not the format's.
  EXPECT_EQ(error_of("basic_auth_users:\n  alice: $6$salt$abc\n"), file + ":2: basic_auth_users.alice: " + not_bcrypt);
  std::string costly = kHash;
  costly.replace(4, 2, "15");
  EXPECT_EQ(error_of("basic_auth_users:\n  alice: " + costly + "\n"),
            file +
                ":2: basic_auth_users.alice: bcrypt cost 15 is above 14 (each check would take seconds; a "
                "scrape's password is checked once)");
  EXPECT_EQ(error_of(std::string("basic_auth_users:\n  'a:b': ") + kHash + "\n"),
            file + ":2: basic_auth_users.a:b: a user name is not empty and has no ':' (basic auth splits at it)");
}

TEST_F(MetricsWebConfigTest, AMissingOrNonRegularFileIsAnErrorNamingIt) {
  absl::StatusOr<MetricsWebConfig> missing = read_metrics_web_config((dir_ / "absent.yml").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("absent.yml\": cannot be read"), std::string::npos) << missing.status();
  const std::string fifo = (dir_ / "fifo.yml").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<MetricsWebConfig> stalled = read_metrics_web_config(fifo);  // returns: never waits for a writer
  ASSERT_FALSE(stalled.ok());
  EXPECT_EQ(stalled.status().message(), "\"" + fifo + "\" is not a regular file");
}

TEST_F(MetricsWebConfigTest, ATlsContextLoadsTheCertificateAndKeyAndNamesAFileThatDoesNotFit) {
  const std::filesystem::path dir = certs();
  MetricsTlsSettings tls{.cert_file = (dir / "server.pem").string(),
                         .key_file = (dir / "server.key").string(),
                         .client_ca_file = (dir / "ca.pem").string(),
                         .client_auth = ClientAuth::kRequireAndVerifyClientCert};
  EXPECT_TRUE(make_tls_context(tls).ok()) << make_tls_context(tls).status();
  MetricsTlsSettings mismatched = tls;
  mismatched.key_file = (dir / "cli.key").string();
  EXPECT_EQ(make_tls_context(mismatched).status().message(),
            "key_file \"" + mismatched.key_file + "\" is not the private key of cert_file \"" + tls.cert_file + "\"");
  MetricsTlsSettings not_pem = tls;
  not_pem.client_ca_file = (dir / "server.key").string();
  EXPECT_EQ(make_tls_context(not_pem).status().message().rfind(
                "client_ca_file \"" + not_pem.client_ca_file + "\": no PEM certificate", 0),
            0u)
      << make_tls_context(not_pem).status();
  MetricsTlsSettings absent = tls;
  absent.cert_file = (dir / "absent.pem").string();
  EXPECT_EQ(
      make_tls_context(absent).status().message().rfind("cert_file \"" + absent.cert_file + "\": cannot be read", 0),
      0u)
      << make_tls_context(absent).status();
}

}  // namespace
}  // namespace podscope
