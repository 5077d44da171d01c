// Writes a capture as TensorBoard's profile plugin expects it:
//   <logdir>/plugins/profile/<run>/<host>.xplane.pb   one per host, each on its own clock, with the measured
//                                                      clock offset / RTT / drift as plane stats
//   <logdir>/plugins/profile/<run>/capture.json        hosts, offsets, RTTs, start skew, errors, attempts
//   <logdir>/plugins/profile/<run>/pod.trace.json.gz   the merged trace on the coordinator's clock (Chrome JSON)
//   <logdir>/plugins/profile/<run>/pod.perfetto-trace  the same in Perfetto's protobuf format (pod_trace.h)
// Every file is written atomically.
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "pod_capture/capture.h"

namespace podscope::pod_capture {

std::filesystem::path run_directory(const std::filesystem::path& logdir, const std::string& run_name);

// Stamps each host's clock measurement onto every plane of its XSpace (names from proto/xspace/names.h).
void record_clock_stats(HostCapture& host, double drift_ppm);

std::string capture_json(const CaptureResult& result);

// The lines `podscope capture` prints after a capture: per host, its outcome and clock; then the skew and,
// when `run_dir` is not empty, where the files are.
std::string capture_summary_text(const CaptureResult& result, const std::filesystem::path& run_dir);

// Records clock stats and writes all files into `run_dir` (created if missing).
absl::Status write_run_files(const std::filesystem::path& run_dir, CaptureResult& result);
// The merged traces of a capture's hosts (pod.trace.json.gz, pod.perfetto-trace), JSON times relative to the
// capture's start; nothing when no host captured.
absl::Status write_capture_traces(const std::filesystem::path& run_dir, const CaptureResult& result);
// write_run_files into run_directory(logdir, result.session_id); returns that directory.
absl::StatusOr<std::filesystem::path> write_run_directory(const std::filesystem::path& logdir, CaptureResult& result);

}  // namespace podscope::pod_capture
