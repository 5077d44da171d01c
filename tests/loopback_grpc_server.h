// A real gRPC server on a free 127.0.0.1 port serving a test's stand-in for a server we cannot run (libtpu's metric
// service, a framework's profiler server), shut down when it goes: calls still in flight (a stand-in that never
// answers) are cancelled, not waited for.
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

namespace podscope::testing {

class LoopbackGrpcServer {
 public:
  // libtpu's server takes only local connections: it is started with grpc::experimental::LocalServerCredentials.
  explicit LoopbackGrpcServer(grpc::Service& service, std::shared_ptr<grpc::ServerCredentials> credentials =
                                                          grpc::InsecureServerCredentials()) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", std::move(credentials), &port_);
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) throw std::runtime_error("cannot start a gRPC server on 127.0.0.1");
  }
  ~LoopbackGrpcServer() { server_->Shutdown(std::chrono::system_clock::now()); }
  LoopbackGrpcServer(const LoopbackGrpcServer&) = delete;
  LoopbackGrpcServer& operator=(const LoopbackGrpcServer&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// A loopback port nobody listens on: one a server bound, then gave back.
inline int dead_loopback_port(grpc::Service& service) { return LoopbackGrpcServer(service).port(); }

}  // namespace podscope::testing
