// Where files go: a local directory, or a prefix in a bucket, written as TensorFlow and the cloud tools write them
// (`gs://bucket/key/prefix`, `s3://bucket/key/prefix`). A location is validated once, when it is parsed, so that a
// client-chosen prefix can never name something else: no `.` or `..` components, no empty ones, no control bytes.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace podscope::storage {

enum class Scheme { kLocal, kS3, kGcs };

struct Location {
  Scheme scheme = Scheme::kLocal;
  std::string bucket;          // a bucket's name (kS3, kGcs)
  std::string key;             // the key prefix in the bucket, without leading or trailing '/'; "" for the bucket
  std::filesystem::path path;  // kLocal

  bool in_bucket() const { return scheme != Scheme::kLocal; }
  // As a user types it: `gs://bucket/key`, `s3://bucket/key`, or the path.
  std::string url() const;
  // The location of `name` (one or more '/'-separated components, each already a plain name) inside this one.
  Location child(std::string_view name) const;
  // The last component ("" for a bucket's root).
  std::string name() const;
  // The location this one is in (a bucket's root is its own parent).
  Location parent() const;
};

// Whether `text` names a bucket (starts with `gs://` or `s3://`).
bool is_bucket_url(std::string_view text);

// A bucket URL or a local path. InvalidArgument naming what is wrong: an unknown scheme (`gcs://`, `http://`), a bucket
// name that no service accepts, a key with an empty, `.` or `..` component, a control byte, over 1024 bytes.
absl::StatusOr<Location> parse_location(std::string_view text);

// Whether `location` is `prefix` or lies inside it, component by component (`s3://runs/a` lies under `s3://runs/`,
// not under `s3://run`), on the same scheme and bucket.
bool lies_under(const Location& location, const Location& prefix);

}  // namespace podscope::storage
