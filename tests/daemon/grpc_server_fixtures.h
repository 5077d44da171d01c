// Real servers for the self-check and metrics server tests: a gRPC server with the health service, a TCP listener that
// never accepts (what a wedged gRPC listener looks like from a client), and metric readings.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include "daemon/grpc_health_service.h"
#include "tests/never_accepting_listener.h"

namespace podscope::testing {

// A gRPC server on 127.0.0.1 (`port` 0 picks one) serving grpc.health.v1.Health.
class HealthServer {
 public:
  explicit HealthServer(int port = 0) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) throw std::runtime_error("cannot start a gRPC server");
  }
  ~HealthServer() { stop(); }
  void stop() {
    if (server_ == nullptr) return;
    server_->Shutdown();
    server_->Wait();
    server_.reset();
  }
  grpc::Server& server() { return *server_; }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  GrpcHealthService health_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// The value of the one series of `family` in `registry`; throws when there is none.
inline double metric_value(prometheus::Registry& registry, const std::string& family) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != family || f.metric.empty()) continue;
    const prometheus::ClientMetric& m = f.metric.front();
    return f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
  }
  throw std::runtime_error("no metric " + family);
}

}  // namespace podscope::testing
