// The CLI's calls to a podscope-coordinator that are not a capture: its worker list (for `podscope status` and for
// `podscope capture --coordinator`'s choice of workers).
#pragma once

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "podscope/v1/coordinator.pb.h"
#include "tls/tls_config.h"

namespace podscope::cli {

// The workers `coordinator` ("host:port", a grpc:// prefix allowed) knows; an error names the address and why it
// did not answer within `deadline`.
absl::StatusOr<podscope::v1::ListWorkersResponse> list_workers(const std::string& coordinator,
                                                               const tls::TlsConfig& tls,
                                                               std::chrono::seconds deadline);

}  // namespace podscope::cli
