// absl::Status <-> grpc::Status: codes map one to one, messages are kept (with the caller's context).
#include "daemon/grpc_status.h"

#include <gtest/gtest.h>

namespace podscope {
namespace {

TEST(GrpcStatus, AbslStatusKeepsItsCodeAndMessageAtTheServiceEdge) {
  EXPECT_TRUE(to_grpc_status(absl::OkStatus()).ok());
  const grpc::Status status = to_grpc_status(absl::AlreadyExistsError("a capture is already running"));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(status.error_message(), "a capture is already running");
}

TEST(GrpcStatus, GrpcStatusBecomesAnAbslStatusNamingTheCall) {
  EXPECT_TRUE(to_absl_status(grpc::Status::OK, "anything").ok());
  const absl::Status status =
      to_absl_status(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"), "Profile to 10.0.0.2:8466");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "Profile to 10.0.0.2:8466: connection refused");
}

}  // namespace
}  // namespace podscope
