// The process-wide state behind the annotation API: the registry that the annotating threads share, and the
// background thread that keeps the agent link, follows the agent's capture windows and drains the rings through
// the record batcher. One per process by nature (like the tracing APIs of TF/JAX), created by init() and never
// destroyed (rings may outlive static destruction).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/agent_link.h"
#include "client/podscope.h"
#include "client/process_registry.h"
#include "client/record_batcher.h"
#include "client/tick_clock.h"
#include "proto/local/frame_codec.h"

namespace podscope::client {

class Runtime {
 public:
  static Runtime& instance();

  // `implicit`: started for a capture-window listener, not by init(); a later init() sets cores and job.
  void start(const Options& options, bool implicit = false);
  void add_listener(CaptureWindowListener* listener);
  void stop();
  // This process serves its framework profiler on `port`: told to the agent now and after every reconnect.
  void announce_profiler(uint16_t port);
  bool connected() const { return connected_.load(std::memory_order_relaxed); }
  ProcessRegistry& registry() { return registry_; }

 private:
  Runtime() = default;
  // Started for a listener or an announcement unless already running.
  void start_implicitly();
  void run();
  void handle(const local::Message& msg);
  // After a capture close: once no thread is inside a step begun before the close (or after a bound),
  // sends the last events and CaptureDone.
  void finish_window_if_steps_ended(bool force);
  void drain_rings();
  void notify_window_opened();
  // Whether the open window is the agent's continuous recording: device tracers are not started for it.
  bool recording() const { return (session_ & local::kRecordingSessionBit) != 0; }
  // Asks every listener for its device planes and sends them (unless `discard`: the agent is gone).
  void collect_device_planes(bool discard);
  void send_device_space(const std::string& bytes);
  // The profiler server to announce, when one was announced and not yet told on this connection.
  std::optional<local::ProfilerServerMsg> take_profiler_announcement(bool new_connection);

  ProcessRegistry registry_;
  TickClock clock_;
  RecordBatcher batcher_{clock_, registry_};

  std::mutex lifecycle_mu_;  // started_, implicit_start_, and stopping_'s setting
  bool started_ = false;
  bool implicit_start_ = false;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<AgentLink> link_;
  std::thread thread_;
  std::atomic<bool> connected_{false};

  // Background-thread state: the capture window.
  bool window_open_ = false;
  bool closing_ = false;  // closed by the agent, waiting for running steps to end
  uint64_t close_tick_ = 0;
  std::chrono::steady_clock::time_point close_deadline_{};
  uint64_t session_ = 0;
  uint64_t dropped_at_open_ = 0;
  std::vector<local::Message> deferred_;  // agent frames read while sending device planes, handled next
};

}  // namespace podscope::client
