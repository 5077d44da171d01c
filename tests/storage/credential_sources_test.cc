// Every credential source of the bucket stores, each against a stand-in that speaks its cloud endpoint's wire format
// (credentials_standin.h), and the keys it hands out signing requests that a real S3 server, SeaweedFS with those
// keys as identities, checks and accepts. Temporary credentials are renewed before they expire; a source that refuses
// is named in the error, and no secret ever appears in one.
#include <gtest/gtest.h>

#include <fstream>

#include "storage/google_credentials.h"
#include "storage/http.h"
#include "storage/location.h"
#include "storage/store.h"
#include "tests/storage/credentials_standin.h"
#include "tests/storage/storage_servers.h"

namespace podscope::storage {
namespace {

using testing::CredentialsStandIn;
using testing::ScopedEnvironment;
using testing::SeaweedS3;

// Keys a credentials service hands out. SeaweedFS knows kIssued and kRenewed as identities; it takes a session token
// for one of its own STS's (a JWT it signed), so the keys it is to accept come without one, and what a session token
// becomes on the wire is checked where the stand-in receives it (kSession).
struct Keys {
  const char* id;
  const char* secret;
  const char* token;
};
constexpr Keys kIssued{"ASIASTANDINISSUED001", "issued-secret-from-the-stand-in", ""};
constexpr Keys kRenewed{"ASIASTANDINRENEWED02", "renewed-secret-from-the-stand-in", ""};
// Keys handed out once and about to expire, which no server knows: used for anything, they would be refused.
constexpr Keys kExpiring{"ASIASTANDINEXPIRING3", "expiring-secret-from-the-stand-in", "expiring-session-token-0003"};
constexpr Keys kSession{"ASIASTANDINSESSION04", "session-secret-from-the-stand-in", "session-token-of-the-role-0004"};

constexpr char kWebIdentityToken[] = "eyJhbGciOiJSUzI1NiJ9.projected-service-account-token.signature";
constexpr char kContainerAuthorization[] = "container-authorization-token-of-the-pod";
constexpr char kRoleArn[] = "arn:aws:iam::123456789012:role/podscope-writer";

std::string keys_json(const Keys& keys, int expires_in_s) {
  return std::string(R"({"AccessKeyId":")") + keys.id + R"(","SecretAccessKey":")" + keys.secret + R"(","Token":")" +
         keys.token + R"(","expires_in_s":)" + std::to_string(expires_in_s) + "}";
}

// The stand-in's configuration: AWS keys handed out in this order, and what its endpoints expect.
std::string aws_config(const std::vector<std::string>& keys, bool refuse = false) {
  std::string list;
  for (const std::string& k : keys) list += (list.empty() ? "" : ",") + k;
  return R"({"aws_keys":[)" + list + R"(],"imds_role":"podscope-node-role","container_authorization":")" +
         kContainerAuthorization + R"(","web_identity_token":")" + kWebIdentityToken + R"(","role_arn":")" + kRoleArn +
         R"(","refuse":)" + (refuse ? "true" : "false") + "}";
}

// No secret of any source, in anything a user or a log sees.
void expect_no_secret(const std::string& text) {
  for (const char* secret : {kIssued.secret, kRenewed.secret, kExpiring.secret, kExpiring.token, kSession.secret,
                             kSession.token, kWebIdentityToken, kContainerAuthorization, "PRIVATE KEY",
                             "google-access-token", "refresh-token-of-the-user", "client-secret-of-gcloud"}) {
    EXPECT_EQ(text.find(secret), std::string::npos) << "\"" << secret << "\" in: " << text;
  }
}

absl::StatusOr<std::shared_ptr<Store>> store_at(const std::string& url) {
  absl::StatusOr<Location> location = parse_location(url);
  if (!location.ok()) return location.status();
  return open_store(*location);
}

// An object written, listed and read back through `store`: every request signed with what its source gave.
void writes_and_reads_back(Store& store, const std::string& name) {
  const std::string bytes = "written with keys from " + store.credential_source();
  const absl::Status writable = store.check_writable();
  ASSERT_TRUE(writable.ok()) << writable;
  const absl::Status written = write_object(store, name, bytes, LocalDurability::kRebuildable);
  ASSERT_TRUE(written.ok()) << written;
  absl::StatusOr<std::string> read = read_object(store, name, 1 << 20);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
  absl::StatusOr<std::vector<ObjectInfo>> listed = store.list("");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 1u);
}

class CredentialSources : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::storage_servers_installed()) return;
  }
  // SeaweedFS knowing the stand-in's keys (and not kExpiring), and the environment of a client of it that has no
  // keys of its own.
  std::vector<std::pair<std::string, std::string>> s3_client_environment(const SeaweedS3& s3) {
    return {{"AWS_ENDPOINT_URL", s3.endpoint()}, {"AWS_REGION", "us-east-1"}};
  }
  static std::vector<std::pair<std::string, std::string>> standin_keys() {
    return {{kIssued.id, kIssued.secret}, {kRenewed.id, kRenewed.secret}};
  }
};

TEST_F(CredentialSources, TheSharedCredentialsFilesProfileSignsRequestsTheServerAccepts) {
  SeaweedS3 s3(standin_keys());
  testing::ScratchDirectory home("aws-home");
  std::filesystem::create_directories(home.path() / ".aws");
  // The default profile's keys are not the server's: only the profile named by AWS_PROFILE can write.
  std::ofstream(home.path() / ".aws" / "credentials")
      << "[default]\naws_access_key_id = AKIADEFAULTPROFILE00\naws_secret_access_key = not-a-key-the-server-knows\n"
      << "[profiling]\naws_access_key_id = " << kIssued.id << "\naws_secret_access_key = " << kIssued.secret << "\n";
  auto variables = s3_client_environment(s3);
  variables.emplace_back("HOME", home.path().string());
  variables.emplace_back("AWS_PROFILE", "profiling");
  ScopedEnvironment env(variables);
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/profile");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->credential_source(),
            "profile \"profiling\" of " + (home.path() / ".aws" / "credentials").string());
  writes_and_reads_back(**store, "capture.json");
}

TEST_F(CredentialSources, TheConfigFilesProfileGivesKeysRegionAndEndpoint) {
  SeaweedS3 s3(standin_keys());
  testing::ScratchDirectory dir("aws-config");
  // The config file names a profile "profile NAME"; its endpoint_url is the S3-compatible store's.
  std::ofstream(dir.path() / "config") << "[default]\nregion = eu-west-1\n\n[profile profiling]\nregion = us-east-1\n"
                                       << "endpoint_url = " << s3.endpoint() << "\naws_access_key_id = " << kRenewed.id
                                       << "\naws_secret_access_key = " << kRenewed.secret << "\n";
  std::ofstream(dir.path() / "credentials") << "[default]\naws_access_key_id = AKIAOTHERPROFILE0000\n"
                                            << "aws_secret_access_key = not-a-key-the-server-knows\n";
  ScopedEnvironment env({{"AWS_CONFIG_FILE", dir.file("config")},
                         {"AWS_SHARED_CREDENTIALS_FILE", dir.file("credentials")},
                         {"AWS_PROFILE", "profiling"}});
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/config");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->credential_source(), "profile \"profiling\" of " + dir.file("config"));
  writes_and_reads_back(**store, "capture.json");
}

TEST_F(CredentialSources, InstanceMetadataV2KeysSignRequestsAndEveryReadCarriesTheSessionToken) {
  SeaweedS3 s3(standin_keys());
  CredentialsStandIn imds(aws_config({keys_json(kIssued, 6 * 3600)}));
  auto variables = s3_client_environment(s3);
  variables.emplace_back("AWS_EC2_METADATA_DISABLED", "false");
  variables.emplace_back("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint() + "/");
  ScopedEnvironment env(variables);
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/imds");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->credential_source(), "the instance metadata service (IMDSv2) at " + imds.endpoint());
  writes_and_reads_back(**store, "host0.xplane.pb");

  // A session token first, then the role and its keys, each asked with that token.
  const std::vector<CredentialsStandIn::Request> asked = imds.requests();
  ASSERT_EQ(asked.size(), 3u);
  EXPECT_EQ(asked[0].method, "PUT");
  EXPECT_EQ(asked[0].path, "/latest/api/token");
  EXPECT_EQ(asked[0].headers.at("x-aws-ec2-metadata-token-ttl-seconds"), "21600");
  EXPECT_EQ(asked[1].path, "/latest/meta-data/iam/security-credentials/");
  EXPECT_EQ(asked[2].path, "/latest/meta-data/iam/security-credentials/podscope-node-role");
  EXPECT_EQ(asked[2].outcome, std::string("keys ") + kIssued.id);
  for (size_t i = 1; i < asked.size(); ++i) {
    EXPECT_EQ(asked[i].method, "GET");
    ASSERT_TRUE(asked[i].headers.contains("x-aws-ec2-metadata-token"));
    EXPECT_TRUE(asked[i].headers.at("x-aws-ec2-metadata-token").starts_with("imds-session-"));
  }
  // As IMDSv2 does, the stand-in refuses a read without the session token: the keys above were not had that way.
  HttpRequest bare;
  bare.url = imds.endpoint() + "/latest/meta-data/iam/security-credentials/podscope-node-role";
  absl::StatusOr<HttpResponse> refused = perform(bare);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 401);
}

TEST_F(CredentialSources, KeysStillValidAreUsedWhenRenewingFailsAndExpiredOnesFailNamingTheSource) {
  SeaweedS3 s3(standin_keys());
  // Within the renewal margin but not expired, and then the role is gone (IMDS answers 404 for it).
  CredentialsStandIn imds(aws_config({keys_json(kIssued, 120), R"({"refuse":true})"}));
  auto variables = s3_client_environment(s3);
  variables.emplace_back("AWS_EC2_METADATA_DISABLED", "false");
  variables.emplace_back("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint());
  ScopedEnvironment env(variables);
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/lasting");
  ASSERT_TRUE(store.ok()) << store.status();
  writes_and_reads_back(**store, "capture.json");
  int refusals = 0;
  for (const CredentialsStandIn::Request& request : imds.requests()) refusals += request.outcome == "refused";
  EXPECT_GT(refusals, 0) << "renewal was not even tried";

  // Keys already expired when renewing fails: the request fails, naming the source and why, never a key.
  CredentialsStandIn expired_imds(aws_config({keys_json(kExpiring, -10), R"({"refuse":true})"}));
  variables.emplace_back("AWS_EC2_METADATA_SERVICE_ENDPOINT", expired_imds.endpoint());
  ScopedEnvironment expired_env(variables);
  absl::StatusOr<std::shared_ptr<Store>> expired = store_at("s3://runs/expired");
  ASSERT_TRUE(expired.ok()) << expired.status();
  const absl::Status failed = write_object(**expired, "capture.json", "{}", LocalDurability::kRebuildable);
  EXPECT_TRUE(absl::IsUnavailable(failed)) << failed;
  EXPECT_NE(failed.message().find("renewing S3 credentials from the instance metadata service (IMDSv2) at " +
                                  expired_imds.endpoint()),
            std::string::npos)
      << failed;
  EXPECT_NE(failed.message().find("404 for role podscope-node-role"), std::string::npos) << failed;
  expect_no_secret(std::string(failed.message()));
}

TEST_F(CredentialSources, TemporaryKeysSessionTokenIsSentAndSignedWithEveryRequest) {
  // The stand-in is also the S3 endpoint here: it records the request signed with the keys it handed out.
  CredentialsStandIn imds(aws_config({keys_json(kSession, 6 * 3600)}));
  ScopedEnvironment env({{"AWS_EC2_METADATA_DISABLED", "false"},
                         {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()},
                         {"AWS_ENDPOINT_URL", imds.endpoint()}});
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/session");
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::Status refused = (*store)->check_writable();  // the stand-in is no S3 server: 404
  EXPECT_FALSE(refused.ok());
  expect_no_secret(std::string(refused.message()));
  const std::vector<CredentialsStandIn::Request> asked = imds.requests();
  ASSERT_EQ(asked.size(), 4u);
  EXPECT_TRUE(asked[3].path.starts_with("/runs/session/")) << asked[3].path;
  EXPECT_EQ(asked[3].headers.at("x-amz-security-token"), kSession.token);
  const std::string& authorization = asked[3].headers.at("authorization");
  EXPECT_TRUE(authorization.starts_with(std::string("AWS4-HMAC-SHA256 Credential=") + kSession.id + "/"))
      << authorization;
  EXPECT_NE(authorization.find("x-amz-security-token"), std::string::npos) << authorization;  // a signed header
}

TEST_F(CredentialSources, KeysNearTheirExpiryAreRenewedBeforeTheNextRequestIsSigned) {
  // The first keys expire within the renewal margin and no server knows them: a request signed with them would be
  // refused, so the writes succeed only with the keys fetched again.
  SeaweedS3 s3(standin_keys());
  CredentialsStandIn imds(aws_config({keys_json(kExpiring, 60), keys_json(kRenewed, 6 * 3600)}));
  auto variables = s3_client_environment(s3);
  variables.emplace_back("AWS_EC2_METADATA_DISABLED", "false");
  variables.emplace_back("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint());
  ScopedEnvironment env(variables);
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/renewed");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(imds.credentials_handed_out(), 1);
  writes_and_reads_back(**store, "capture.json");
  // Renewed once; the renewed keys, far from their expiry, are kept for every later request.
  EXPECT_EQ(imds.credentials_handed_out(), 2);
  ASSERT_TRUE(write_object(**store, "again.json", "{}", LocalDurability::kRebuildable).ok());
  EXPECT_EQ(imds.credentials_handed_out(), 2);
}

TEST_F(CredentialSources, ContainerCredentialsAreAskedWithTheAuthorizationTokenFromTheEnvironmentOrItsFile) {
  SeaweedS3 s3(standin_keys());
  CredentialsStandIn container(aws_config({keys_json(kIssued, 6 * 3600)}));
  const std::string uri = container.endpoint() + "/v2/credentials/4b2f8a1e-podscope";
  {
    auto variables = s3_client_environment(s3);
    variables.emplace_back("AWS_CONTAINER_CREDENTIALS_FULL_URI", uri);
    variables.emplace_back("AWS_CONTAINER_AUTHORIZATION_TOKEN", kContainerAuthorization);
    ScopedEnvironment env(variables);
    absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/container");
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->credential_source(), "the container credentials endpoint " + uri);
    writes_and_reads_back(**store, "capture.json");
  }
  {
    // EKS Pod Identity: the token in a file the kubelet rotates.
    std::ofstream(container.file("eks-pod-identity-token")) << kContainerAuthorization << "\n";
    auto variables = s3_client_environment(s3);
    variables.emplace_back("AWS_CONTAINER_CREDENTIALS_FULL_URI", uri);
    variables.emplace_back("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", container.file("eks-pod-identity-token"));
    ScopedEnvironment env(variables);
    absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/pod-identity");
    ASSERT_TRUE(store.ok()) << store.status();
    writes_and_reads_back(**store, "capture.json");
  }
  const std::vector<CredentialsStandIn::Request> asked = container.requests();
  ASSERT_EQ(asked.size(), 2u);
  for (const CredentialsStandIn::Request& request : asked) {
    EXPECT_EQ(request.path, "/v2/credentials/4b2f8a1e-podscope");
    EXPECT_EQ(request.headers.at("authorization"), kContainerAuthorization);
  }
}

TEST_F(CredentialSources, AContainerEndpointThatRefusesTheTokenIsNamedWithoutTheToken) {
  CredentialsStandIn container(aws_config({keys_json(kIssued, 6 * 3600)}));
  const std::string uri = container.endpoint() + "/v2/credentials/4b2f8a1e-podscope";
  ScopedEnvironment env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", uri},
                         {"AWS_CONTAINER_AUTHORIZATION_TOKEN", "a-token-of-another-pod"},
                         {"AWS_ENDPOINT_URL", "http://127.0.0.1:9"}});
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/container");
  ASSERT_FALSE(store.ok());
  const std::string error(store.status().message());
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << error;
  EXPECT_NE(error.find("s3://runs/container"), std::string::npos) << error;
  EXPECT_NE(error.find("the container credentials endpoint " + uri), std::string::npos) << error;
  EXPECT_NE(error.find("403"), std::string::npos) << error;
  EXPECT_EQ(error.find("a-token-of-another-pod"), std::string::npos) << error;
  expect_no_secret(error);
}

TEST_F(CredentialSources, AContainerEndpointOffThisMachineInClearTextIsNotSentTheToken) {
  // Hosts elsewhere on the network, over http: the token would cross it in clear text. Refused before any
  // connection (an unreachable or unresolvable host would otherwise be a timeout, not this message).
  CredentialsStandIn container(aws_config({keys_json(kIssued, 6 * 3600)}));
  for (const char* uri : {"http://10.0.0.8/v2/credentials/podscope", "http://metadata.example.com/creds",
                          "http://169.254.170.2.example.com/creds", "http://[fd00:ec2::24]/creds"}) {
    ScopedEnvironment env({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", uri},
                           {"AWS_CONTAINER_AUTHORIZATION_TOKEN", kContainerAuthorization},
                           {"AWS_ENDPOINT_URL", "http://127.0.0.1:9"}});
    absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/container");
    ASSERT_FALSE(store.ok()) << uri;
    const std::string error(store.status().message());
    EXPECT_NE(
        error.find(std::string("the container credentials endpoint ") + uri + " is neither https nor on this machine"),
        std::string::npos)
        << error;
    expect_no_secret(error);
  }
  // Loopback, by address or by name, is this machine: the token goes there.
  for (const char* host : {"127.0.0.1", "localhost"}) {
    ScopedEnvironment env(
        {{"AWS_CONTAINER_CREDENTIALS_FULL_URI",
          std::string("http://") + host + container.host().substr(container.host().find(':')) + "/v2/credentials/x"},
         {"AWS_CONTAINER_AUTHORIZATION_TOKEN", kContainerAuthorization},
         {"AWS_ENDPOINT_URL", "http://127.0.0.1:9"}});
    EXPECT_TRUE(store_at("s3://runs/container").ok()) << host;
  }
  EXPECT_EQ(container.credentials_handed_out(), 2);
}

TEST_F(CredentialSources, AWebIdentityIsExchangedWithStsForKeysTheServerAccepts) {
  SeaweedS3 s3(standin_keys());
  CredentialsStandIn sts(aws_config({keys_json(kIssued, 3600)}));
  std::ofstream(sts.file("token")) << kWebIdentityToken << "\n";
  auto variables = s3_client_environment(s3);
  variables.emplace_back("AWS_WEB_IDENTITY_TOKEN_FILE", sts.file("token"));
  variables.emplace_back("AWS_ROLE_ARN", kRoleArn);
  variables.emplace_back("AWS_ENDPOINT_URL_STS", sts.endpoint());
  ScopedEnvironment env(variables);
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/irsa");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->credential_source(),
            "the web identity token " + sts.file("token") + " (role " + kRoleArn + ", through STS)");
  writes_and_reads_back(**store, "capture.json");
  const std::vector<CredentialsStandIn::Request> asked = sts.requests();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].method, "POST");
  EXPECT_EQ(asked[0].outcome, std::string("keys ") + kIssued.id);
  // STS's AssumeRoleWithWebIdentity is not signed: the token is the proof.
  EXPECT_FALSE(asked[0].headers.contains("authorization"));
}

TEST_F(CredentialSources, StsRefusingTheWebIdentityIsNamedWithItsCodeButNotTheToken) {
  CredentialsStandIn sts(aws_config({keys_json(kIssued, 3600)}, /*refuse=*/true));
  std::ofstream(sts.file("token")) << kWebIdentityToken;
  ScopedEnvironment env({{"AWS_WEB_IDENTITY_TOKEN_FILE", sts.file("token")},
                         {"AWS_ROLE_ARN", kRoleArn},
                         {"AWS_ENDPOINT_URL_STS", sts.endpoint()},
                         {"AWS_ENDPOINT_URL", "http://127.0.0.1:9"}});
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/irsa");
  ASSERT_FALSE(store.ok());
  const std::string error(store.status().message());
  EXPECT_NE(error.find("the web identity token " + sts.file("token")), std::string::npos) << error;
  EXPECT_NE(error.find("InvalidIdentityToken"), std::string::npos) << error;
  expect_no_secret(error);
}

TEST_F(CredentialSources, AnInstanceMetadataServiceThatRefusesIsNamed) {
  CredentialsStandIn imds(aws_config({keys_json(kIssued, 3600)}, /*refuse=*/true));
  ScopedEnvironment env({{"AWS_EC2_METADATA_DISABLED", "false"},
                         {"AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.endpoint()},
                         {"AWS_ENDPOINT_URL", "http://127.0.0.1:9"}});
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("s3://runs/imds");
  ASSERT_FALSE(store.ok());
  const std::string error(store.status().message());
  EXPECT_NE(error.find("the instance metadata service (IMDSv2) at " + imds.endpoint()), std::string::npos) << error;
  EXPECT_NE(error.find("403"), std::string::npos) << error;
}

// --- Cloud Storage ---

std::string google_config(const std::vector<std::pair<std::string, int>>& tokens, const std::string& more = "",
                          bool refuse = false) {
  std::string list;
  for (const auto& [token, expires_in_s] : tokens) {
    list += (list.empty() ? "" : ",") + std::string(R"({"access_token":")") + token + R"(","expires_in_s":)" +
            std::to_string(expires_in_s) + "}";
  }
  return R"({"google_keys":[)" + list + "]" + more + R"(,"refuse":)" + (refuse ? "true" : "false") + "}";
}

// A service account's key pair, made fresh by OpenSSL's command line, and the stand-in's configuration that knows
// its public key (where the token endpoint checks the JWT's signature); `tokens` handed out in order.
class ServiceAccount {
 public:
  static constexpr char kEmail[] = "podscope-writer@profiling-project.iam.gserviceaccount.com";
  static constexpr char kKeyId[] = "3f9a0c2d7e41";

  ServiceAccount() : dir_("service-account") {
    for (const char* name : {"private.pem", "other.pem"}) {
      const std::string make =
          "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out " + dir_.file(name) + " 2>/dev/null";
      EXPECT_EQ(std::system(make.c_str()), 0) << make;
    }
    const std::string pub = "openssl pkey -in " + dir_.file("private.pem") + " -pubout -out " + dir_.file("public.pem");
    EXPECT_EQ(std::system(pub.c_str()), 0) << pub;
  }
  std::string standin_config(const std::vector<std::pair<std::string, int>>& tokens, bool refuse = false) const {
    return google_config(tokens,
                         std::string(R"(,"service_account":{"client_email":")") + kEmail + R"(","private_key_id":")" +
                             kKeyId + R"(","public_key_file":")" + dir_.file("public.pem") + R"("})",
                         refuse);
  }
  // The key file as Google's console makes it, its token_uri the stand-in's (the JWT's audience);
  // `signed_by_another_key`: a private key that is not the account's.
  std::string key_file(const CredentialsStandIn& token_endpoint, bool signed_by_another_key = false) const {
    std::ifstream in(dir_.file(signed_by_another_key ? "other.pem" : "private.pem"));
    const std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string escaped;
    for (const char c : pem) escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
    const std::string path = dir_.file(signed_by_another_key ? "other-key.json" : "key.json");
    std::ofstream(path) << R"({"type":"service_account","project_id":"profiling-project","private_key_id":")" << kKeyId
                        << R"(","private_key":")" << escaped << R"(","client_email":")" << kEmail
                        << R"(","client_id":"104912","token_uri":")" << token_endpoint.endpoint() << R"(/token"})";
    return path;
  }

 private:
  testing::ScratchDirectory dir_;
};

TEST_F(CredentialSources, TheMetadataServerIsAskedWithItsFlavorHeaderAndItsTokenRenewedNearExpiry) {
  CredentialsStandIn metadata(google_config({{"google-access-token-short", 20}, {"google-access-token-long", 3600}}));
  ScopedEnvironment env({{"GCE_METADATA_HOST", metadata.host()}});
  std::optional<GoogleHmac> hmac;
  absl::StatusOr<std::shared_ptr<GoogleCredentials>> found = GoogleCredentials::find(hmac);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_FALSE(hmac.has_value());
  EXPECT_EQ((*found)->source(), "the metadata server at " + metadata.host());
  EXPECT_EQ((*found)->endpoint(), "https://storage.googleapis.com");
  // The first token is within the renewal margin: asked again, once; the second is kept.
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> authorization = (*found)->authorization();
    ASSERT_TRUE(authorization.ok()) << authorization.status();
    EXPECT_EQ(*authorization, "Bearer google-access-token-long");
  }
  const std::vector<CredentialsStandIn::Request> asked = metadata.requests();
  ASSERT_EQ(asked.size(), 2u);
  for (const CredentialsStandIn::Request& request : asked) {
    EXPECT_EQ(request.path, "/computeMetadata/v1/instance/service-accounts/default/token");
    EXPECT_EQ(request.headers.at("metadata-flavor"), "Google");
  }
  // The stand-in refuses a request without the header, as Google's metadata server does.
  HttpRequest bare;
  bare.url = metadata.endpoint() + "/computeMetadata/v1/instance/service-accounts/default/token";
  absl::StatusOr<HttpResponse> refused = perform(bare);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 403);
  // A store over it says where its credentials come from.
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("gs://runs/metadata");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->credential_source(), "the metadata server at " + metadata.host());
}

TEST_F(CredentialSources, AnAccessTokenStillValidIsUsedWhenRenewingFailsAndAnExpiredOneFailsNamingTheSource) {
  // A token within the renewal margin, then a metadata server in trouble (503).
  CredentialsStandIn refusing(R"({"google_keys":[{"access_token":"google-access-token-lasting","expires_in_s":20},)"
                              R"({"refuse":true}],"refuse":false})");
  ScopedEnvironment env({{"GCE_METADATA_HOST", refusing.host()}});
  std::optional<GoogleHmac> hmac;
  absl::StatusOr<std::shared_ptr<GoogleCredentials>> found = GoogleCredentials::find(hmac);
  ASSERT_TRUE(found.ok()) << found.status();
  absl::StatusOr<std::string> lasting = (*found)->authorization();
  ASSERT_TRUE(lasting.ok()) << lasting.status();
  EXPECT_EQ(*lasting, "Bearer google-access-token-lasting");
  EXPECT_GT(refusing.requests().size(), 1u) << "renewal was not even tried";

  CredentialsStandIn expired(R"({"google_keys":[{"access_token":"google-access-token-expired","expires_in_s":-5},)"
                             R"({"refuse":true}],"refuse":false})");
  ScopedEnvironment expired_env({{"GCE_METADATA_HOST", expired.host()}});
  found = GoogleCredentials::find(hmac);
  ASSERT_TRUE(found.ok()) << found.status();
  absl::StatusOr<std::string> failed = (*found)->authorization();
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("renewing the access token from the metadata server at " + expired.host()),
            std::string::npos)
      << failed.status();
  expect_no_secret(std::string(failed.status().message()));
}

TEST_F(CredentialSources, AServiceAccountsJwtIsVerifiedWithItsPublicKeyAndTheTokenItEarnsIsUsed) {
  const ServiceAccount account;
  CredentialsStandIn oauth(account.standin_config({{"google-access-token-of-the-account", 3600}}));
  const std::string key = account.key_file(oauth);
  ScopedEnvironment env({{"GOOGLE_APPLICATION_CREDENTIALS", key}});
  std::optional<GoogleHmac> hmac;
  absl::StatusOr<std::shared_ptr<GoogleCredentials>> found = GoogleCredentials::find(hmac);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ((*found)->source(),
            std::string("service account ") + ServiceAccount::kEmail + " (GOOGLE_APPLICATION_CREDENTIALS " + key + ")");
  absl::StatusOr<std::string> authorization = (*found)->authorization();
  ASSERT_TRUE(authorization.ok()) << authorization.status();
  EXPECT_EQ(*authorization, "Bearer google-access-token-of-the-account");
  const std::vector<CredentialsStandIn::Request> asked = oauth.requests();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].path, "/token");
  // The outcome is the stand-in's verdict: the signature verified with the account's public key, the claims checked.
  EXPECT_EQ(asked[0].outcome, "token google-access-token-of-the-account");
}

TEST_F(CredentialSources, AJwtSignedWithAnotherKeyIsRefusedNamingTheAccountButNoKey) {
  const ServiceAccount account;
  CredentialsStandIn oauth(account.standin_config({{"google-access-token-never-issued", 3600}}));
  const std::string key = account.key_file(oauth, /*signed_by_another_key=*/true);
  ScopedEnvironment env({{"GOOGLE_APPLICATION_CREDENTIALS", key}});
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("gs://runs/forged");
  ASSERT_FALSE(store.ok());
  const std::string error(store.status().message());
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << error;
  EXPECT_NE(error.find("gs://runs/forged"), std::string::npos) << error;
  EXPECT_NE(error.find(std::string("service account ") + ServiceAccount::kEmail), std::string::npos) << error;
  EXPECT_NE(error.find("Invalid JWT Signature."), std::string::npos) << error;
  expect_no_secret(error);
  ASSERT_EQ(oauth.requests().size(), 1u);
  EXPECT_EQ(oauth.requests()[0].status, 400);
}

TEST_F(CredentialSources, GcloudsUserCredentialsAreRefreshedAtTheirTokenEndpoint) {
  CredentialsStandIn oauth(google_config(
      {{"google-access-token-of-the-user", 3600}},
      R"(,"authorized_user":{"client_id":"764086051850.apps.googleusercontent.com","client_secret":"client-secret-of-gcloud","refresh_token":"refresh-token-of-the-user"})"));
  testing::ScratchDirectory home("gcloud-home");
  std::filesystem::create_directories(home.path() / ".config" / "gcloud");
  const std::filesystem::path adc = home.path() / ".config" / "gcloud" / "application_default_credentials.json";
  std::ofstream(adc) << R"({"type":"authorized_user","client_id":"764086051850.apps.googleusercontent.com",)"
                     << R"("client_secret":"client-secret-of-gcloud","refresh_token":"refresh-token-of-the-user",)"
                     << R"("token_uri":")" << oauth.endpoint() << R"(/token"})";
  ScopedEnvironment env({{"HOME", home.path().string()}});
  std::optional<GoogleHmac> hmac;
  absl::StatusOr<std::shared_ptr<GoogleCredentials>> found = GoogleCredentials::find(hmac);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ((*found)->source(), "user credentials (gcloud's application default credentials " + adc.string() + ")");
  EXPECT_EQ(*(*found)->authorization(), "Bearer google-access-token-of-the-user");
  EXPECT_EQ(oauth.credentials_handed_out(), 1);
}

TEST_F(CredentialSources, GsutilsHmacKeysSignCloudStoragesXmlApiRequestsTheServerChecks) {
  // Cloud Storage's XML API is S3's protocol: SeaweedFS stands for it, checking every SigV4 signature.
  SeaweedS3 s3(standin_keys());
  testing::ScratchDirectory dir("boto");
  const std::string port = s3.endpoint().substr(s3.endpoint().rfind(':') + 1);
  std::ofstream(dir.path() / "boto") << "[Credentials]\ngs_access_key_id = " << kIssued.id
                                     << "\ngs_secret_access_key = " << kIssued.secret
                                     << "\ngs_host = 127.0.0.1\ngs_port = " << port
                                     << "\n\n[Boto]\nis_secure = False\n";
  ScopedEnvironment env({{"BOTO_CONFIG", dir.file("boto")}});
  absl::StatusOr<std::shared_ptr<Store>> store = store_at("gs://runs/hmac");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->credential_source(), "HMAC key gs_access_key_id of " + dir.file("boto"));
  writes_and_reads_back(**store, "capture.json");
  // The same file with a wrong secret is refused by the server, naming the file but not the secret.
  std::ofstream(dir.path() / "boto") << "[Credentials]\ngs_access_key_id = " << kIssued.id
                                     << "\ngs_secret_access_key = " << kRenewed.secret
                                     << "\ngs_host = 127.0.0.1\ngs_port = " << port
                                     << "\n\n[Boto]\nis_secure = False\n";
  absl::StatusOr<std::shared_ptr<Store>> wrong = store_at("gs://runs/hmac");
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  const absl::Status refused = (*wrong)->check_writable();
  EXPECT_TRUE(absl::IsPermissionDenied(refused)) << refused;
  EXPECT_NE(refused.message().find("HMAC key gs_access_key_id of " + dir.file("boto")), std::string::npos) << refused;
  expect_no_secret(std::string(refused.message()));
}

}  // namespace
}  // namespace podscope::storage
