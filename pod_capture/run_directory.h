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

std::string capture_json(const CaptureResult& result);

// The lines `podscope capture` prints after a capture: per host, its outcome and clock; then the skew and,
// when `run_dir` is not empty, where the files are.
std::string capture_summary_text(const CaptureResult& result, const std::filesystem::path& run_dir);

// Writes all files into `run_dir` (created if missing), one host at a time: its answer parsed, its clock measurement
// stamped on every plane, its file written and its planes fed to the merged traces, then the parsed space and the
// host's answer (HostCapture::xspace) released, so the writing holds one parsed space whatever the pod's size.
absl::Status write_run_files(const std::filesystem::path& run_dir, CaptureResult& result);
// write_run_files into run_directory(logdir, result.session_id); returns that directory.
absl::StatusOr<std::filesystem::path> write_run_directory(const std::filesystem::path& logdir, CaptureResult& result);

}  // namespace podscope::pod_capture
