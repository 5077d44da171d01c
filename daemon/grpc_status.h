// The one conversion between absl::Status (inside libraries) and grpc::Status (at service edges and from
// client calls). Both use the canonical code numbering, so codes map one to one.
#pragma once

#include <string_view>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace podscope {

grpc::Status to_grpc_status(const absl::Status& status);

// `context` names the call that failed and its peer; the message reads "<context>: <gRPC message>".
absl::Status to_absl_status(const grpc::Status& status, std::string_view context);

}  // namespace podscope
