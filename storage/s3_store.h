// A bucket prefix through S3's REST API (store.h), signed with SigV4 by curl: AWS's own S3, an S3-compatible store
// (AWS_ENDPOINT_URL), and Cloud Storage's XML API with HMAC keys, which speaks the same protocol. The protocol used
// is the least that keeps objects whole: PutObject for what fits in one part, else a multipart upload (created,
// parts of kPartBytes each with its Content-MD5, kPartsInFlight at once, completed, or aborted), GetObject read as it
// arrives (resumed with a range at the same ETag when the connection breaks), ListObjectsV2, HeadObject, DeleteObject.
#pragma once

#include <memory>

#include "storage/aws_credentials.h"
#include "storage/store.h"

namespace podscope::storage {

// The part size of multipart uploads (S3's smallest part but the last is 5 MiB), and how many parts of one upload are
// sent at once: a writer holds at most kPartsInFlight + 1 parts (40 MiB).
inline constexpr size_t kPartBytes = size_t{8} << 20;
inline constexpr size_t kPartsInFlight = 4;

class S3Store : public Store {
 public:
  // `keys` sign every request; `endpoint` says where they go. A gs:// root here is Cloud Storage's XML API.
  S3Store(Location root, S3Endpoint endpoint, std::shared_ptr<AwsCredentials> keys);

  std::string credential_source() const override { return keys_->source(); }
  absl::StatusOr<std::unique_ptr<ObjectWriter>> create(std::string_view name, LocalDurability durability) override;
  absl::StatusOr<std::unique_ptr<ObjectReader>> open(std::string_view name) override;
  absl::StatusOr<std::vector<ObjectInfo>> list(std::string_view prefix) override;
  absl::StatusOr<ObjectInfo> stat(std::string_view name) override;
  absl::Status remove(std::string_view name) override;
  // A multipart upload created and aborted: S3 checks the bucket and the right to write, and nothing is left.
  absl::Status check_writable() override;

  // One signed request on object `key` (a full key in the bucket; "" for the bucket itself) with `query` (sorted,
  // encoded), retried when transient.
  absl::StatusOr<HttpResponse> call(const std::string& method, const std::string& key, const std::string& query,
                                    std::vector<std::string> headers = {}, std::string_view body = {});
  // A GET of object `key` read as it arrives.
  absl::StatusOr<std::unique_ptr<HttpStream>> open_stream(const std::string& key, std::vector<std::string> headers);
  // A failed answer as an error naming the object, what the service said and the credentials' source.
  absl::Status error_of(const absl::StatusOr<HttpResponse>& answer, const std::string& what, const std::string& key);
  std::string url_of(const std::string& key, const std::string& query) const;
  std::string object_url(const std::string& key) const;  // as users name it: s3://bucket/key

 private:
  S3Endpoint endpoint_;
  std::shared_ptr<AwsCredentials> keys_;
};

}  // namespace podscope::storage
