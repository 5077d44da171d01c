// The process-wide state behind the annotation API: identity (cores, job), interned names, the per-thread
// rings and the background thread that drains them to the agent. One per process by nature (like the
// tracing APIs of TF/JAX), created by init() and never destroyed (rings may outlive static destruction).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "proto/local/frame_codec.h"
#include "client/agent_link.h"
#include "client/podscope.h"
#include "client/thread_ring.h"
#include "client/tick_clock.h"

namespace podscope::client {

class Runtime {
 public:
  static Runtime& instance();

  // `implicit`: started for a capture-window listener, not by init(); a later init() sets cores and job.
  void start(const Options& options, bool implicit = false);
  void add_listener(CaptureWindowListener* listener);
  void stop();
  NameId intern(std::string_view name);
  // A new ring for the calling thread, or null when max_threads rings exist.
  std::shared_ptr<ThreadRing> new_ring(int64_t thread_id);
  uint8_t core_index(int32_t core);
  uint64_t total_dropped() const;
  void count_ringless_drop() { ringless_drops_.fetch_add(1, std::memory_order_relaxed); }
  bool connected() const { return connected_.load(std::memory_order_relaxed); }
  // This process serves its framework profiler on `port`: told to the agent now and after every reconnect.
  void announce_profiler(uint16_t port);

 private:
  Runtime();
  void run();
  void handle(const local::Message& msg);
  // After a capture close: once no thread is inside a step begun before the close (or after a bound),
  // sends the last events and CaptureDone.
  // Sends the finished steps gathered so far as one frame.
  void queue_steps();
  void finish_window_if_steps_ended(bool force);
  // Moves every ring's records into frames: steps always, other events while a window is open.
  void drain_rings();
  // Per core index of the ring being drained: the batch its events and input stages go to.
  struct CoreBatches {
    local::EventsMsg events;
    local::InputStagesMsg input_stages;
    local::AllocationsMsg allocations;
  };
  void add_event(const RawEvent& e, ThreadRing& ring, std::vector<CoreBatches>& batches);
  // An input stage: in an InputStages batch, or as a free-form event where the agent's version lacks them.
  void add_input_stage(const RawEvent& e, int64_t start_ns, int64_t duration_ns, CoreBatches& batches);
  // An allocation record, in an Allocations batch; dropped where the agent's version lacks them.
  void add_allocation(const RawEvent& e, int64_t time_ns, CoreBatches& batches);
  // The name `name_id` into a batch's names, once per batch.
  void define_name(uint32_t name_id, std::vector<std::pair<uint32_t, std::string>>& names);
  // Sends one of the three batch frames (its `records` then cleared with its names); an agent that does not read
  // fast enough loses whole batches, counted.
  template <typename Batch, typename Record>
  void queue_batch(Batch& batch, std::vector<Record>& records);
  void queue_events(local::EventsMsg& batch);
  void queue_input_stages(local::InputStagesMsg& batch);
  void queue_allocations(local::AllocationsMsg& batch);
  void notify_window_opened();
  // Whether the open window is the agent's continuous recording: device tracers are not started for it.
  bool recording() const { return (session_ & local::kRecordingSessionBit) != 0; }
  // Asks every listener for its device planes and sends them (unless `discard`: the agent is gone).
  void collect_device_planes(bool discard);
  void send_device_space(const std::string& bytes);
  // At the negotiated version.
  local::RegisterMsg register_msg();
  // Whether the identity changed since the last registration (and clears it).
  bool take_reregister();
  // The profiler server to announce, when one was announced and not yet told on this connection.
  std::optional<local::ProfilerServerMsg> take_profiler_announcement(bool new_connection);

  mutable std::mutex mu_;  // identity, names, ring list
  std::vector<int32_t> cores_;
  std::string job_;
  std::string program_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, NameId> name_ids_;
  std::vector<std::shared_ptr<ThreadRing>> rings_;
  bool reregister_ = false;
  uint16_t profiler_port_ = 0;  // 0: none announced
  bool profiler_told_ = false;  // on the current connection
  bool implicit_start_ = false;
  std::vector<CaptureWindowListener*> listeners_;
  size_t ring_capacity_ = 65536;
  size_t max_threads_ = 256;

  std::unique_ptr<AgentLink> link_;
  TickClock clock_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> ringless_drops_{0};
  std::atomic<uint64_t> unsent_drops_{0};  // events dropped because the agent did not read fast enough
  bool started_ = false;

  // Background-thread state.
  bool window_open_ = false;
  bool closing_ = false;  // closed by the agent, waiting for running steps to end
  uint64_t close_tick_ = 0;
  std::chrono::steady_clock::time_point close_deadline_{};
  uint64_t session_ = 0;
  uint64_t dropped_at_open_ = 0;
  std::vector<local::StepMsg> steps_;
  std::vector<local::Message> deferred_;  // agent frames read while sending device planes, handled next
  std::vector<int32_t> drain_cores_;      // cores_ as of the current drain
  // Per drained ring: the last record that a continuation record may extend.
  local::EventMsg* last_event_ = nullptr;
  local::StepMsg* last_step_ = nullptr;
  local::InputStageMsg* last_input_stage_ = nullptr;
  bool told_input_stages_unsupported_ = false;
  bool told_allocations_unsupported_ = false;
};

}  // namespace podscope::client
