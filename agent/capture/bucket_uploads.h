// Captures the agent writes into a bucket itself, as TensorFlow's profiler server writes into a gs:// repository_root
// (CollectData, then SaveXSpace): `<repository_root>/<session_id>/<host>.xplane.pb`, so a pod's hosts' bytes never
// pass through the client. The agent writes with its own credentials, so a caller may name only a root under the
// operator's allowed_repository_roots (a caller must not make it write wherever its credentials reach). An upload
// that fails is aborted (nothing half visible), and the capture is kept on the agent's disk for a retry.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/capture/repository_quota.h"

namespace podscope::agent {

// The option's prefixes: each a bucket URL (gs://, s3://) that parses (no `..`, no control bytes).
absl::Status check_repository_roots(const std::vector<std::string>& roots);

// Whether a request's bucket root may be written: it lies under one of `allowed`, component by component.
// PERMISSION_DENIED naming the root and allowed_repository_roots otherwise, with an audit line naming `caller`.
absl::Status allow_bucket_root(std::string_view requested_root, const std::vector<std::string>& allowed,
                               std::string_view caller);

// Writes `xspace` as <requested_root>/<session_id>/<host>.xplane.pb (a session id used before gets the first free
// `_N` suffix, as on a local disk) and returns the object's URL. When the upload fails: ABORTED naming the object and
// why, and where the bytes were kept (<failed_uploads>/<bucket>/<object>) for a retry, or why they could not be. The
// bucket's bytes are not the agent's disk (allowed_repository_roots bounds where they go); a copy kept locally is,
// and is charged to `quota` as a capture written under repository_root is (refused past it, the capture then lost).
absl::StatusOr<std::string> upload_capture(std::string_view requested_root, const std::string& session_id,
                                           const std::string& host, std::string_view xspace,
                                           const std::filesystem::path& failed_uploads, RepositoryQuota& quota);

// What a client reads of a capture it does not receive, read from it in one pass.
struct CaptureDescription {
  // The XSpace's host names and each plane's id, name, stats and stat metadata, without a line (a serialized XSpace).
  std::string summary;
  // The capture's own analysis (a serialized podscope.v1.HostAnalysis; analysis/tools/tool.h) as the analysis of its
  // file `<file_stem>.xplane.pb` would find it: the client merges the hosts' analyses into the pod's without reading
  // their files back. Empty when the capture could not be analysed (the client then reads the file).
  std::string host_analysis;
};
CaptureDescription describe_capture(const std::string& xspace, std::string_view file_stem);

// Writes a capture's analysis (CaptureDescription::host_analysis) beside its uploaded file `object_url` as that file's
// per-host database (<file>.host_analysis.pb, analysis/runner/analysis_runner.h), tied to the object's version as the
// bucket tells it (`xspace_size` bytes were uploaded), so `podscope analyze` of the run merges it instead of reading
// the file back and analysing it again.
absl::Status upload_host_database(const std::string& object_url, uint64_t xspace_size,
                                  const std::string& host_analysis);

}  // namespace podscope::agent
