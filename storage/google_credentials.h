// Cloud Storage credentials found as Google's own libraries find them (Application Default Credentials), first
// found wins:
//   1. an emulator, STORAGE_EMULATOR_HOST or CLOUD_STORAGE_EMULATOR_ENDPOINT: no credentials at all;
//   2. GOOGLE_APPLICATION_CREDENTIALS: a service account's key (a JWT signed with its private key by OpenSSL,
//      exchanged at its token_uri) or a user's refresh token;
//   3. HMAC keys for Cloud Storage's XML API, as gsutil keeps them: gs_access_key_id and gs_secret_access_key in the
//      [Credentials] section of BOTO_CONFIG (else ~/.boto), with its gs_host and gs_port;
//   4. gcloud's application default credentials file (~/.config/gcloud/application_default_credentials.json);
//   5. the metadata server (GKE workload identity, TPU and Compute Engine VMs); GCE_METADATA_HOST moves it.
// Access tokens are fetched again before they expire.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace podscope::storage {

// Cloud Storage's XML API with HMAC keys: S3's protocol at gsutil's gs_host.
struct GoogleHmac {
  std::string endpoint;  // "https://storage.googleapis.com"
  std::string access_key_id;
  std::string secret;
  std::string source;
};

class GoogleCredentials {
 public:
  // Where Cloud Storage's JSON API is: https://storage.googleapis.com, or the emulator's.
  const std::string& endpoint() const { return endpoint_; }
  const std::string& source() const { return source_; }
  // The Authorization header's value ("" for an emulator), a token fetched again near its expiry.
  absl::StatusOr<std::string> authorization();

  // The JSON API's credentials, or HMAC keys for the XML API (`hmac`), whichever comes first in the order above.
  // FailedPrecondition naming the sources looked at when none has credentials.
  static absl::StatusOr<std::shared_ptr<GoogleCredentials>> find(std::optional<GoogleHmac>& hmac);

 private:
  enum class Kind { kEmulator, kServiceAccount, kAuthorizedUser, kMetadataServer };
  GoogleCredentials(Kind kind, std::string endpoint, std::string source)
      : kind_(kind), endpoint_(std::move(endpoint)), source_(std::move(source)) {}
  absl::Status refresh();

  Kind kind_;
  std::string endpoint_;
  std::string source_;
  std::string key_json_;  // a service account's key or a user's refresh token, as read
  std::mutex mu_;
  std::string token_;
  int64_t expires_at_s_ = 0;
};

}  // namespace podscope::storage
