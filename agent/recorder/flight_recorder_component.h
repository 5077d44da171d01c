// The flight recorder as one of the agent's lifecycle components: starts recording when the agent is configured
// with flight_recorder_seconds > 0, publishes the recorder's gauges every second (a scrape only serializes) and
// stops recording at shutdown.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "daemon/lifecycle_component.h"
#include "agent/recorder/flight_recorder.h"

namespace podscope::agent {

class FlightRecorderComponent final : public LifecycleComponent {
 public:
  // `at_start`: the settings to record with from the start; nullopt: off until StartContinuousProfiling.
  FlightRecorderComponent(FlightRecorder& recorder, std::optional<FlightRecorderSettings> at_start);
  ~FlightRecorderComponent() override;

  std::string_view name() const override { return "flight_recorder"; }
  absl::Status start() override;
  void stop() override;

 private:
  FlightRecorder& recorder_;
  std::optional<FlightRecorderSettings> at_start_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread publisher_;
};

}  // namespace podscope::agent
