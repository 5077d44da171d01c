// The one storage interface: where a run's files live, a local directory or a bucket prefix, behind the same calls.
// Objects are named relative to the store's root with '/' between components. Whatever the service, nothing is ever
// half visible: an object appears whole when its writer commits, or not at all (a local file through a temporary
// file and a rename; S3 through a multipart upload, completed or aborted; Cloud Storage through a resumable upload,
// finalized or cancelled). Transient failures (a dropped connection, a 5xx, throttling) are retried with backoff
// within the call; what fails in the end names the bucket, the object, what the service said and the credentials'
// source, never a secret.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/location.h"

namespace podscope::storage {

// An object being written: bytes are sent in parts of bounded size as they come (a writer holds at most a few parts,
// whatever the object's size), and the object appears only when commit() succeeds. A writer destroyed uncommitted
// aborts (nothing is left, not even parts).
class ObjectWriter {
 public:
  virtual ~ObjectWriter() = default;
  // Appends bytes. An error is kept: later writes do nothing and commit() reports it.
  virtual absl::Status write(std::string_view bytes) = 0;
  // Makes the object visible, whole, with what was written; the service checks what it received against checksums
  // sent with it.
  virtual absl::Status commit() = 0;
  // Gives the object up: nothing of it stays.
  virtual void abort() = 0;
  virtual uint64_t bytes_written() const = 0;
};

// An object being read, front to back, with bounded memory.
class ObjectReader {
 public:
  virtual ~ObjectReader() = default;
  // Up to `size` bytes into `buffer`; 0 at the object's end.
  virtual absl::StatusOr<size_t> read(char* buffer, size_t size) = 0;
};

struct ObjectInfo {
  std::string name;  // relative to the store's root
  uint64_t size = 0;
  // What changes whenever the object is written again, as the store itself tells it: S3's ETag, Cloud Storage's
  // generation, a local file's inode and modification time. Equal versions of one name mean the same bytes, with no
  // need to read them (what ties a host's database to its file).
  std::string version;
};

// How durable a local write is (a bucket's objects are durable once committed).
enum class LocalDurability { kSynced, kRebuildable };

class Store {
 public:
  explicit Store(Location root) : root_(std::move(root)) {}
  virtual ~Store() = default;

  // The root, as a user typed it.
  const Location& root() const { return root_; }
  // What the store writes with, for messages: "the environment's AWS_ACCESS_KEY_ID", "the metadata server" ...
  virtual std::string credential_source() const = 0;

  // A new object `name`, written as it comes.
  virtual absl::StatusOr<std::unique_ptr<ObjectWriter>> create(std::string_view name, LocalDurability durability) = 0;
  virtual absl::StatusOr<std::unique_ptr<ObjectReader>> open(std::string_view name) = 0;
  // The objects whose names start with `prefix` (every level below it), sorted by name. A missing local directory
  // lists as empty.
  virtual absl::StatusOr<std::vector<ObjectInfo>> list(std::string_view prefix) = 0;
  // NotFound when there is no such object.
  virtual absl::StatusOr<ObjectInfo> stat(std::string_view name) = 0;
  // Removes an object; one that is not there is no error.
  virtual absl::Status remove(std::string_view name) = 0;
  // Checks that objects can be written under the root, leaving nothing behind (an upload begun and aborted): a
  // wrong key or a missing bucket is found before anything is captured.
  virtual absl::Status check_writable() = 0;
  // The file of `name` when the store is a local directory (readers map it instead of streaming it).
  virtual std::optional<std::string> local_file(std::string_view /*name*/) const { return std::nullopt; }

 protected:
  // The full key in the bucket of object `name` (a bucket's store).
  std::string key_of(std::string_view name) const { return root_.child(name).key; }

 private:
  Location root_;
};

// The store rooted at `root`: a local directory, or a bucket prefix with credentials found as the cloud's own tools
// find them (credentials.h).
absl::StatusOr<std::shared_ptr<Store>> open_store(const Location& root);

// Writes `bytes` as object `name` whole (retried as a whole when the service lost the upload).
absl::Status write_object(Store& store, std::string_view name, std::string_view bytes, LocalDurability durability);
// Reads object `name` whole, refusing one larger than `max_bytes`.
absl::StatusOr<std::string> read_object(Store& store, std::string_view name, uint64_t max_bytes);

}  // namespace podscope::storage
