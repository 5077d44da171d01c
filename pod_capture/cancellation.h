// Ends a pod run from another thread, promptly: its daemon stops. The calls the run has in flight are cancelled
// (gRPC answers them CANCELLED at once), it sends nothing more and takes no further attempt. Thread-safe; one per
// daemon, cancelled once.
#pragma once

#include <mutex>
#include <unordered_set>

#include <grpcpp/client_context.h>

namespace podscope::pod_capture {

class Cancellation {
 public:
  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    for (grpc::ClientContext* call : in_flight_) call->TryCancel();
  }
  bool cancelled() const {
    std::lock_guard lock(mu_);
    return cancelled_;
  }
  // A call now in flight: cancelled with the run, or at once when the run already was. Each is forgotten before
  // its context goes.
  void track(grpc::ClientContext* call) {
    std::lock_guard lock(mu_);
    if (cancelled_) call->TryCancel();
    in_flight_.insert(call);
  }
  void forget(grpc::ClientContext* call) {
    std::lock_guard lock(mu_);
    in_flight_.erase(call);
  }

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  std::unordered_set<grpc::ClientContext*> in_flight_;
};

// A call tracked by `cancellation` (none: never cancelled) for as long as it lives.
class TrackedCall {
 public:
  TrackedCall(Cancellation* cancellation, grpc::ClientContext* call) : cancellation_(cancellation), call_(call) {
    if (cancellation_ != nullptr) cancellation_->track(call_);
  }
  ~TrackedCall() {
    if (cancellation_ != nullptr) cancellation_->forget(call_);
  }
  TrackedCall(const TrackedCall&) = delete;
  TrackedCall& operator=(const TrackedCall&) = delete;

 private:
  Cancellation* cancellation_;
  grpc::ClientContext* call_;
};

}  // namespace podscope::pod_capture
