#include "daemon/grpc_status.h"

#include <string>

namespace podscope {

grpc::Status to_grpc_status(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status to_absl_status(const grpc::Status& status, std::string_view context) {
  if (status.ok()) return absl::OkStatus();
  std::string message(context);
  message.append(": ").append(status.error_message());
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), message);
}

}  // namespace podscope
