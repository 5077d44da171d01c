// S3 credentials found as AWS's own tools find them, first found wins:
//   1. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) in the environment;
//   2. the profile AWS_PROFILE (else "default") of the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
//      ~/.aws/credentials) or of the config file (AWS_CONFIG_FILE, else ~/.aws/config);
//   3. a web identity (EKS's IAM roles for service accounts): AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, exchanged
//      with STS (AssumeRoleWithWebIdentity; AWS_ENDPOINT_URL_STS, else the regional endpoint);
//   4. the container credentials endpoint (EKS Pod Identity, ECS): AWS_CONTAINER_CREDENTIALS_FULL_URI or
//      _RELATIVE_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE);
//   5. the instance metadata service, IMDSv2 (a session token first), unless AWS_EC2_METADATA_DISABLED=true;
//      AWS_EC2_METADATA_SERVICE_ENDPOINT moves it.
// Temporary credentials are fetched again before they expire. The region is AWS_REGION, AWS_DEFAULT_REGION or the
// profile's `region` (else us-east-1); the endpoint AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the profile's
// `endpoint_url` (an S3-compatible store, addressed path-style), else AWS's own.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "storage/http.h"

namespace podscope::storage {

// Where S3 requests go and how they are addressed.
struct S3Endpoint {
  std::string region = "us-east-1";
  std::string endpoint;  // "http://127.0.0.1:8333"; empty: AWS's own (virtual-hosted)
};
S3Endpoint s3_endpoint_from_environment();

class AwsCredentials {
 public:
  // The first source of the chain that has credentials; FailedPrecondition naming every source looked at when none
  // has.
  static absl::StatusOr<std::shared_ptr<AwsCredentials>> find(const S3Endpoint& endpoint);

  // Keys given as they are (Cloud Storage's HMAC keys), named by `source`.
  static std::shared_ptr<AwsCredentials> fixed(std::string access_key_id, std::string secret, std::string source,
                                               std::string region);

  // Keys to sign with, fetched again when they are near their expiry.
  absl::StatusOr<SigV4> signing_keys();
  // Which source they come from (never the keys themselves).
  const std::string& source() const { return source_; }

 private:
  enum class Kind { kStatic, kWebIdentity, kContainer, kInstanceMetadata };
  AwsCredentials(Kind kind, std::string source, std::string region) : kind_(kind), source_(std::move(source)) {
    keys_.region = std::move(region);
  }
  absl::Status refresh();

  Kind kind_;
  std::string source_;
  std::mutex mu_;
  SigV4 keys_;
  int64_t expires_at_s_ = 0;  // 0: never
};

}  // namespace podscope::storage
