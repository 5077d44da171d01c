#include "agent/recorder/flight_recorder_component.h"

#include <chrono>

namespace podscope::agent {

FlightRecorderComponent::FlightRecorderComponent(FlightRecorder& recorder,
                                                 std::optional<FlightRecorderSettings> at_start)
    : recorder_(recorder), at_start_(at_start) {}

FlightRecorderComponent::~FlightRecorderComponent() { stop(); }

absl::Status FlightRecorderComponent::start() {
  if (at_start_) {
    if (absl::Status s = recorder_.start(*at_start_); !s.ok()) return s;
  }
  publisher_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) recorder_.publish_metrics();
  });
  return absl::OkStatus();
}

void FlightRecorderComponent::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (publisher_.joinable()) publisher_.join();
  recorder_.stop().IgnoreError();  // NOT_FOUND when it was not recording
}

}  // namespace podscope::agent
