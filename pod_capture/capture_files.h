// A capture's files in its run directory (run_directory/), as TensorBoard's profile plugin expects them:
//   <host>.xplane.pb   one per host, each on its own clock, with the measured clock offset / RTT / drift as plane stats
//   capture.json       hosts, offsets, RTTs, start skew, errors, attempts
//   pod.trace.json.gz  the merged trace on the coordinator's clock (Chrome JSON)
//   pod.perfetto-trace the same in Perfetto's protobuf format (pod_trace.h)
// Every file is written atomically.
#pragma once

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "pod_capture/capture.h"
#include "run_directory/run_directory.h"

namespace podscope::pod_capture {

std::string capture_json(const CaptureResult& result);

// The lines `podscope capture` prints after a capture: per host, its outcome and clock; then the skew and,
// when `run_location` is not empty, where the files are.
std::string capture_summary_text(const CaptureResult& result, std::string_view run_location);

// Writes all files into `run` (created if missing), one host at a time: its answer parsed, its clock measurement
// stamped on every plane, its file written and its planes fed to the merged traces, then the parsed space and the
// host's answer (HostCapture::xspace) released, so the writing holds one parsed space whatever the pod's size. A run
// in a bucket, whose agents wrote their own host files, gets only capture.json: the merged traces would read every
// host's file back through this process (`podscope analyze` makes them).
absl::Status write_run_files(const run_directory::RunDirectory& run, CaptureResult& result);
// write_run_files into the run result.session_id of `logdir`; returns that run.
absl::StatusOr<run_directory::RunDirectory> write_run_directory(const std::filesystem::path& logdir,
                                                                CaptureResult& result);

}  // namespace podscope::pod_capture
