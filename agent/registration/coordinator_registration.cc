#include "agent/registration/coordinator_registration.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "daemon/log.h"
#include "podscope/v1/coordinator.grpc.pb.h"

namespace podscope::agent {
std::string new_instance_id() {
  std::random_device random;
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%08x%08x%08x%08x", random(), random(), random(), random());
  return hex;
}

CoordinatorRegistration::CoordinatorRegistration(RegistrationSettings settings)
    : settings_(std::move(settings)),
      stub_(podscope::v1::Coordinator::NewStub(grpc::CreateChannel(settings_.coordinator, settings_.credentials))) {}

std::string advertised_agent_address(const std::string& listen, int port, const std::string& host_name) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") host = host_name;
  return host + ":" + std::to_string(port);
}

absl::Status CoordinatorRegistration::start() {
  std::string address = settings_.advertised_address();
  thread_ = std::thread([this, address = std::move(address)] { run(address); });
  return absl::OkStatus();
}

void CoordinatorRegistration::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    if (in_flight_ != nullptr) in_flight_->TryCancel();  // a shutdown waits for no coordinator
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CoordinatorRegistration::run(std::string address) {
  podscope::v1::Coordinator::Stub* stub = stub_.get();
  bool registered = false;
  int64_t interval_ms = settings_.retry_interval_ms;
  bool warned = false;
  std::unique_lock lock(mu_);
  while (!stop_) {
    grpc::ClientContext context;
    // A registration waits while the coordinator calls this agent back (kVerifyTimeout there).
    context.set_deadline(std::chrono::system_clock::now() + (registered ? kHeartbeatTimeout : kRegisterTimeout));
    in_flight_ = &context;
    lock.unlock();
    if (!registered) {
      podscope::v1::RegisterRequest request;
      request.set_host_name(settings_.host_name);
      request.set_address(address);
      request.set_job(settings_.job);
      request.set_instance_id(settings_.instance_id);
      podscope::v1::RegisterResponse response;
      const grpc::Status status = stub->Register(&context, request, &response);
      if (status.ok()) {
        registered = true;
        warned = false;
        interval_ms = response.heartbeat_interval_ms() > 0 ? response.heartbeat_interval_ms() : 5000;
        PODSCOPE_LOG(kInfo) << "registered with coordinator " << settings_.coordinator << " as " << settings_.host_name
                            << " at " << address;
      } else {
        interval_ms = settings_.retry_interval_ms;
        if (!warned) {
          PODSCOPE_LOG(kWarning) << "cannot register with coordinator " << settings_.coordinator << ": "
                                 << status.error_message() << " (retrying every " << interval_ms << " ms)";
          warned = true;
        }
      }
    } else {
      podscope::v1::HeartbeatRequest request;
      request.set_host_name(settings_.host_name);
      request.set_address(address);
      podscope::v1::HeartbeatResponse response;
      const grpc::Status status = stub->Heartbeat(&context, request, &response);
      if (!status.ok() || !response.known()) {
        registered = false;
        interval_ms = status.ok() ? 0 : settings_.retry_interval_ms;
      }
    }
    lock.lock();
    in_flight_ = nullptr;
    cv_.wait_for(lock, std::chrono::milliseconds(interval_ms), [this] { return stop_; });
  }
}

void CoordinatorRegistration::report_trigger(podscope::v1::TriggerReport report) {
  report.set_host_name(settings_.host_name);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kHeartbeatTimeout);
  podscope::v1::TriggerReportResponse response;
  const grpc::Status status = stub_->ReportTrigger(&context, report, &response);
  if (!status.ok()) {
    PODSCOPE_LOG(kWarning) << "coordinator " << settings_.coordinator << " not told of triggered snapshot "
                           << report.snapshot_id() << ": " << status.error_message();
    return;
  }
  PODSCOPE_LOG(kInfo) << "coordinator told of triggered snapshot " << report.snapshot_id() << ": "
                      << (response.run_name().empty() ? response.detail() : "pod snapshot " + response.run_name());
}

}  // namespace podscope::agent
