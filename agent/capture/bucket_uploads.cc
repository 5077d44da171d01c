#include "agent/capture/bucket_uploads.h"

#include <map>
#include <memory>
#include <mutex>

#include "analysis/runner/analysis_runner.h"
#include "analysis/tools/tool.h"
#include "daemon/atomic_file.h"
#include "daemon/log.h"
#include "proto/xspace/serialize.h"
#include "proto/xspace/xspace_stream_reader.h"
#include "storage/store.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::agent {
namespace {

// One store per root, kept: finding credentials may take a round trip to a metadata service, and temporary ones are
// renewed by the store itself.
absl::StatusOr<std::shared_ptr<storage::Store>> store_for(const storage::Location& root) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<storage::Store>> stores;
  std::lock_guard lock(mu);
  if (auto it = stores.find(root.url()); it != stores.end()) return it->second;
  absl::StatusOr<std::shared_ptr<storage::Store>> opened = storage::open_store(root);
  if (opened.ok()) stores.emplace(root.url(), *opened);
  return opened;
}

// Where a failed upload's bytes are kept: <failed_uploads>/<bucket>/<object>, within the quota.
absl::StatusOr<std::string> keep_locally(const std::filesystem::path& failed_uploads, const storage::Location& object,
                                         std::string_view bytes, RepositoryQuota& quota) {
  const std::filesystem::path path = failed_uploads / object.bucket / object.key;
  absl::StatusOr<RepositoryQuota::PlannedWrite> admitted = quota.admit(path.parent_path());
  if (!admitted.ok()) return admitted.status();
  if (absl::Status s = write_file_atomically(path, bytes); !s.ok()) return s;
  quota.charge(*admitted, path, bytes.size());
  return path.string();
}

}  // namespace

absl::Status check_repository_roots(const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    absl::StatusOr<storage::Location> parsed = storage::parse_location(root);
    if (!parsed.ok()) return parsed.status();
    if (!parsed->in_bucket()) {
      return absl::InvalidArgumentError("\"" + root + "\" is no bucket prefix (gs://bucket/prefix/ or s3://...)");
    }
  }
  return absl::OkStatus();
}

absl::Status allow_bucket_root(std::string_view requested_root, const std::vector<std::string>& allowed,
                               std::string_view caller) {
  absl::StatusOr<storage::Location> requested = storage::parse_location(requested_root);
  if (requested.ok()) {
    for (const std::string& prefix : allowed) {
      absl::StatusOr<storage::Location> root = storage::parse_location(prefix);
      if (root.ok() && storage::lies_under(*requested, *root)) return absl::OkStatus();
    }
  }
  const std::string why = requested.ok() ? "it is not under the agent's allowed_repository_roots"
                                         : std::string(requested.status().message());
  PODSCOPE_LOG(kWarning) << "audit: refused to write captures into " << requested_root << " for " << caller << ": "
                         << why;
  return absl::PermissionDeniedError("repository_root " + std::string(requested_root) + " is refused: " + why +
                                     " (set allowed_repository_roots to write into a bucket)");
}

absl::StatusOr<std::string> upload_capture(std::string_view requested_root, const std::string& session_id,
                                           const std::string& host, std::string_view xspace,
                                           const std::filesystem::path& failed_uploads, RepositoryQuota& quota) {
  absl::StatusOr<storage::Location> root = storage::parse_location(requested_root);
  if (!root.ok()) return root.status();
  const std::string file_name = host + ".xplane.pb";
  storage::Location object = root->child(session_id).child(file_name);
  absl::StatusOr<std::shared_ptr<storage::Store>> store = store_for(*root);
  absl::Status written = store.status();
  if (store.ok()) {
    // A session id used before (by this host) gets the first free suffix: an earlier capture is never overwritten.
    std::string name = session_id + "/" + file_name;
    for (int suffix = 1; (*store)->stat(name).ok() && suffix <= 10'000; ++suffix) {
      name = session_id + "_" + std::to_string(suffix) + "/" + file_name;
    }
    object = root->child(name);
    written = storage::write_object(**store, name, xspace, storage::LocalDurability::kSynced);
  }
  if (written.ok()) return object.url();
  absl::StatusOr<std::string> kept = keep_locally(failed_uploads, object, xspace, quota);
  const std::string where = kept.ok() ? "kept at " + *kept + " for a retry"
                                      : "and it could not be kept either: " + std::string(kept.status().message());
  PODSCOPE_LOG(kWarning) << "upload of " << object.url() << " failed: " << written.message() << "; " << where;
  return absl::AbortedError("the upload of " + object.url() + " failed: " + std::string(written.message()) +
                            "; the capture was " + where);
}

CaptureDescription describe_capture(const std::string& xspace, std::string_view file_stem) {
  tensorflow::profiler::XSpace summary;
  analysis::HostAnalysisBuilder host;
  xspace::XSpaceHeader header;
  const absl::Status read = xspace::read_xspace_planes(
      xspace, "the capture",
      [&](const tensorflow::profiler::XPlane& plane) {
        tensorflow::profiler::XPlane& kept = *summary.add_planes();
        kept.set_id(plane.id());
        kept.set_name(plane.name());
        *kept.mutable_stats() = plane.stats();
        *kept.mutable_stat_metadata() = plane.stat_metadata();
        host.read_plane(plane);
        return absl::OkStatus();
      },
      &header, analysis::HostAnalysisBuilder::wants_line);
  CaptureDescription description;
  if (!read.ok()) return description;
  absl::StatusOr<podscope::v1::HostAnalysis> analysis = std::move(host).finish(header.hostnames, file_stem);
  if (analysis.ok()) {
    absl::StatusOr<std::string> bytes = xspace::serialize_deterministically(*analysis);
    if (bytes.ok()) description.host_analysis = *std::move(bytes);
  }
  for (std::string& name : header.hostnames) summary.add_hostnames(std::move(name));
  description.summary = summary.SerializeAsString();
  return description;
}

absl::Status upload_host_database(const std::string& object_url, uint64_t xspace_size,
                                  const std::string& host_analysis) {
  absl::StatusOr<storage::Location> object = storage::parse_location(object_url);
  if (!object.ok()) return object.status();
  podscope::v1::HostAnalysis analysis;
  if (!analysis.ParseFromString(host_analysis)) return absl::InternalError("the capture's analysis does not parse");
  absl::StatusOr<std::shared_ptr<storage::Store>> store = store_for(object->parent());
  if (!store.ok()) return store.status();
  // The version the store gave the object just written; one of another size is no longer the capture.
  absl::StatusOr<storage::ObjectInfo> uploaded = (*store)->stat(object->name());
  if (!uploaded.ok()) return uploaded.status();
  if (uploaded->size != xspace_size || uploaded->version.empty()) {
    return absl::FailedPreconditionError(object_url + " is no longer the capture uploaded (" +
                                         std::to_string(uploaded->size) + " bytes, " + std::to_string(xspace_size) +
                                         " uploaded), or its store tells no version");
  }
  absl::StatusOr<std::string> database = analysis::host_database(*uploaded, analysis);
  if (!database.ok()) return database.status();
  return storage::write_object(**store, analysis::host_analysis_file_name(object->name()), *database,
                               storage::LocalDurability::kSynced);
}

}  // namespace podscope::agent
