// A bucket prefix through Cloud Storage's JSON API (store.h), with the least of it that keeps objects whole: a
// resumable upload (a session begun, chunks of kChunkBytes sent as they fill, the last with the object's MD5 in
// X-Goog-Hash, which the service checks; a session that is cancelled leaves nothing), media downloads read as they
// arrive, listings, metadata and deletes. With HMAC keys (google_credentials.h) the bucket is reached through the XML
// API instead, as S3 (s3_store.h).
#pragma once

#include <memory>

#include "storage/google_credentials.h"
#include "storage/http.h"
#include "storage/store.h"

namespace podscope::storage {

// A resumable upload's chunk: what a writer holds (a multiple of the 256 KiB the service asks for).
inline constexpr size_t kChunkBytes = size_t{8} << 20;

class GcsStore : public Store {
 public:
  GcsStore(Location root, std::shared_ptr<GoogleCredentials> credentials);

  std::string credential_source() const override { return credentials_->source(); }
  absl::StatusOr<std::unique_ptr<ObjectWriter>> create(std::string_view name, LocalDurability durability) override;
  absl::StatusOr<std::unique_ptr<ObjectReader>> open(std::string_view name) override;
  absl::StatusOr<std::vector<ObjectInfo>> list(std::string_view prefix) override;
  absl::StatusOr<ObjectInfo> stat(std::string_view name) override;
  absl::Status remove(std::string_view name) override;
  // A resumable upload begun and cancelled: the service checks the bucket and the right to write.
  absl::Status check_writable() override;

  // One request with the credentials' Authorization, retried when transient.
  absl::StatusOr<HttpResponse> call(const std::string& method, const std::string& url,
                                    std::vector<std::string> headers = {}, std::string_view body = {});
  absl::Status error_of(const absl::StatusOr<HttpResponse>& answer, const std::string& what, const std::string& key);
  std::string object_url(const std::string& key) const { return "gs://" + root().bucket + "/" + key; }
  // The JSON API's URL of object `key` (metadata, or its bytes with ?alt=media).
  std::string api_url(const std::string& key) const;
  // A new resumable session for `key`: its URL.
  absl::StatusOr<std::string> begin_upload(const std::string& key);
  const std::string& endpoint() const { return credentials_->endpoint(); }

 private:
  std::shared_ptr<GoogleCredentials> credentials_;
};

// The store of a gs:// root: the JSON API, or the XML API when the credentials found are HMAC keys.
absl::StatusOr<std::shared_ptr<Store>> open_gcs_store(const Location& root);

}  // namespace podscope::storage
