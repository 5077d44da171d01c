#include "storage/store.h"

#include "storage/gcs_store.h"
#include "storage/local_store.h"
#include "storage/s3_store.h"

namespace podscope::storage {

absl::StatusOr<std::shared_ptr<Store>> open_store(const Location& root) {
  switch (root.scheme) {
    case Scheme::kLocal: return std::make_shared<LocalStore>(root);
    case Scheme::kS3: {
      const S3Endpoint endpoint = s3_endpoint_from_environment();
      absl::StatusOr<std::shared_ptr<AwsCredentials>> keys = AwsCredentials::find(endpoint);
      if (!keys.ok()) {
        return absl::Status(keys.status().code(), root.url() + ": " + std::string(keys.status().message()));
      }
      return std::make_shared<S3Store>(root, endpoint, *keys);
    }
    case Scheme::kGcs: return open_gcs_store(root);
  }
  return absl::InternalError("unknown scheme");
}

absl::Status write_object(Store& store, std::string_view name, std::string_view bytes, LocalDurability durability) {
  absl::Status last;
  // A service that lost an upload (restarted) is asked again with the whole object: the bytes are all here.
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<std::unique_ptr<ObjectWriter>> writer = store.create(name, durability);
    if (!writer.ok()) return writer.status();
    last = (*writer)->write(bytes);
    if (last.ok()) last = (*writer)->commit();
    if (last.ok() || !absl::IsNotFound(last)) return last;
  }
  return last;
}

absl::StatusOr<std::string> read_object(Store& store, std::string_view name, uint64_t max_bytes) {
  absl::StatusOr<std::unique_ptr<ObjectReader>> reader = store.open(name);
  if (!reader.ok()) return reader.status();
  std::string out;
  char buffer[65536];
  while (true) {
    absl::StatusOr<size_t> n = (*reader)->read(buffer, sizeof buffer);
    if (!n.ok()) return n.status();
    if (*n == 0) return out;
    if (out.size() + *n > max_bytes) {
      return absl::ResourceExhaustedError(store.root().child(name).url() + " is larger than " +
                                          std::to_string(max_bytes) + " bytes");
    }
    out.append(buffer, *n);
  }
}

}  // namespace podscope::storage
