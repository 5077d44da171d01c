// `podscope capture --coordinator`: asks podscope-coordinator to capture and receives the run directory
// as a stream of file chunks, written under the CLI's own --logdir (each file through a temp + rename).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>

#include "absl/status/statusor.h"
#include "pod_capture/capture.h"
#include "podscope/v1/coordinator.grpc.pb.h"

namespace podscope::pod_capture {

struct RemoteCaptureOutcome {
  std::filesystem::path run_dir;  // the CLI's copy (empty for a run the coordinator wrote into a bucket)
  std::string run_location;
  int exit_code = 1;
  std::string summary_text;
};

// Dials the coordinator with `credentials` (tls::channel_credentials of the CLI's flags).
absl::StatusOr<RemoteCaptureOutcome> capture_through_coordinator(const std::string& coordinator_address,
                                                                 std::shared_ptr<grpc::ChannelCredentials> credentials,
                                                                 const podscope::v1::CaptureRequest& request,
                                                                 const std::filesystem::path& logdir,
                                                                 const ProgressFn& progress);

}  // namespace podscope::pod_capture
