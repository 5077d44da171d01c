#include "daemon/grpc_self_check.h"

#include <pthread.h>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "daemon/grpc_status.h"
#include "daemon/log.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace podscope {

GrpcSelfCheck::GrpcSelfCheck(Settings settings, const Clock& clock, prometheus::Registry& registry,
                             const prometheus::Labels& labels)
    : settings_(std::move(settings)),
      clock_(clock),
      failures_total_(prometheus::BuildCounter()
                          .Name("podscope_grpc_self_check_failures_total")
                          .Help("Loopback self-checks of the gRPC port (a fresh connection, Health/Check) that failed.")
                          .Labels(labels)
                          .Register(registry)
                          .Add({})),
      passing_(prometheus::BuildGauge()
                   .Name("podscope_grpc_self_check_passing")
                   .Help("1 while the last loopback self-check of the gRPC port passed, else 0.")
                   .Labels(labels)
                   .Register(registry)
                   .Add({})) {
  passing_.Set(1);  // serving since the start; the first check confirms it
}

GrpcSelfCheck::~GrpcSelfCheck() { stop(); }

void GrpcSelfCheck::start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "grpc-self-check");
    run();
  });
}

void GrpcSelfCheck::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (in_flight_ != nullptr) in_flight_->TryCancel();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GrpcSelfCheck::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, settings_.period, [this] { return stopping_; })) {
    lock.unlock();
    check_now().IgnoreError();  // recorded: what /healthz and wedged() report
    lock.lock();
  }
}

absl::Status GrpcSelfCheck::check_now() {
  absl::Status result = call_health_check();
  record(result);
  return result;
}

absl::Status GrpcSelfCheck::call_health_check() {
  grpc::ChannelArguments args;
  // A subchannel of its own: a connection the listener must accept now, not one shared with another channel.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub =
      grpc::health::v1::Health::NewStub(grpc::CreateCustomChannel(settings_.target, settings_.credentials, args));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + settings_.deadline);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return absl::CancelledError("stopping");
    in_flight_ = &context;
  }
  grpc::health::v1::HealthCheckRequest request;  // the server as a whole
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  {
    std::lock_guard lock(mutex_);
    in_flight_ = nullptr;
  }
  const std::string call = "grpc.health.v1.Health/Check on " + settings_.target;
  if (!status.ok()) return to_absl_status(status, call + " over a new connection");
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(call + ": the server answers " +
                                  grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()));
  }
  return absl::OkStatus();
}

void GrpcSelfCheck::record(const absl::Status& result) {
  std::lock_guard lock(mutex_);
  if (stopping_ && !result.ok()) return;  // cancelled by stop(), says nothing of the server
  if (result.ok()) {
    if (consecutive_failures_ > 0) {
      PODSCOPE_LOG(kInfo) << "gRPC self-check of " << settings_.target << " passes again after "
                          << consecutive_failures_ << " failure(s)";
    }
    consecutive_failures_ = 0;
    failure_.reset();
    passing_.Set(1);
    return;
  }
  failures_total_.Increment();
  passing_.Set(0);
  if (consecutive_failures_++ == 0) failure_ = HealthFailure{{}, clock_.now_ns()};
  failure_->why = result.ToString() + "; " + std::to_string(consecutive_failures_) + " failure(s) in a row";
  if (consecutive_failures_ == settings_.failures_to_wedge) {
    PODSCOPE_LOG(kError) << "gRPC server wedged: its self-check failed " << consecutive_failures_ << " times in a row ("
                         << result.ToString() << "); the watchdog pings stop";
  } else {
    PODSCOPE_LOG(kWarning) << "gRPC self-check failed (" << consecutive_failures_
                           << " in a row): " << result.ToString();
  }
}

bool GrpcSelfCheck::wedged() const {
  std::lock_guard lock(mutex_);
  return consecutive_failures_ >= settings_.failures_to_wedge;
}

std::optional<HealthFailure> GrpcSelfCheck::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

}  // namespace podscope
