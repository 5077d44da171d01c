// A local directory as a store (store.h): objects are files, each written to a temporary file and renamed into place.
#pragma once

#include "storage/store.h"

namespace podscope::storage {

class LocalStore : public Store {
 public:
  explicit LocalStore(Location root);

  std::string credential_source() const override { return "the local file system"; }
  absl::StatusOr<std::unique_ptr<ObjectWriter>> create(std::string_view name, LocalDurability durability) override;
  absl::StatusOr<std::unique_ptr<ObjectReader>> open(std::string_view name) override;
  absl::StatusOr<std::vector<ObjectInfo>> list(std::string_view prefix) override;
  absl::StatusOr<ObjectInfo> stat(std::string_view name) override;
  absl::Status remove(std::string_view name) override;
  // A temporary file created and removed under the root (the root made if missing).
  absl::Status check_writable() override;
  std::optional<std::string> local_file(std::string_view name) const override;

 private:
};

}  // namespace podscope::storage
