// The background thread's translation of ring records into frames: finished steps into Steps frames, and while a
// capture window is open every other record into its batch (Events, InputStages or Allocations) per core and
// thread, at what the agent's protocol version has. An agent that does not read fast enough loses whole
// batches, counted in the registry's drops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/agent_link.h"
#include "client/process_registry.h"
#include "client/thread_ring.h"
#include "client/tick_clock.h"
#include "proto/local/frame_codec.h"

namespace podscope::client {

// What may wait in the link's queue before new batches are dropped. What is queued when a capture closes is read
// by the agent before the client's answer: 4 MiB (about 100 k events) keeps that a fraction of a second even with
// many clients flooding one agent.
inline constexpr size_t kMaxQueuedRecordBytes = 4u << 20;

class RecordBatcher {
 public:
  RecordBatcher(const TickClock& clock, ProcessRegistry& registry) : clock_(clock), registry_(registry) {}

  // Moves every ring's records into frames queued on `link`: steps always, the other records only while a window
  // is open (`window_session`: its session).
  void drain(AgentLink& link, std::optional<uint64_t> window_session);

 private:
  // Per core index of the ring being drained: the batch its events and input stages go to.
  struct CoreBatches {
    local::EventsMsg events;
    local::InputStagesMsg input_stages;
    local::AllocationsMsg allocations;
  };
  void add_record(const RawEvent& e, ThreadRing& ring, std::vector<CoreBatches>& batches);
  // A continuation record: more arguments of the record before it.
  void extend_last_record(const RawEvent& e);
  void add_event(const RawEvent& e, int64_t start_ns, int64_t duration_ns, CoreBatches& batches);
  // An input stage: in an InputStages batch, or as a free-form event where the agent's version lacks them.
  void add_input_stage(const RawEvent& e, int64_t start_ns, int64_t duration_ns, CoreBatches& batches);
  // An allocation record, in an Allocations batch; dropped where the agent's version lacks them.
  void add_allocation(const RawEvent& e, int64_t time_ns, CoreBatches& batches);
  // Whether the agent's version lacks frames of `type`; the first time (`told`), says so on stderr: `records` need
  // a newer agent, and `meanwhile` what happens to them.
  bool agent_lacks(local::FrameType type, const char* records, const char* meanwhile, bool& told);
  // The name `name_id` into a batch's names, once per batch.
  void define_name(uint32_t name_id, std::vector<std::pair<uint32_t, std::string>>& names);
  // Queues `frame`, of `records` records; an agent that does not read fast enough loses it whole, counted.
  void send(local::Message frame, size_t records);
  // Sends the finished steps gathered so far as one frame.
  void queue_steps();
  // Sends one of the three batch frames unless it is empty; it is then cleared, its names too.
  template <typename Batch>
  void queue_batch(Batch& batch);
  // `batch` with room for one more record (sent first when full), for the open window.
  template <typename Batch>
  Batch& with_room(Batch& batch);

  const TickClock& clock_;
  ProcessRegistry& registry_;
  // The drain in progress: its link, its window and the cores as of its start.
  AgentLink* link_ = nullptr;
  std::optional<uint64_t> window_session_;
  std::vector<int32_t> cores_;
  std::vector<local::StepMsg> steps_;
  // Per drained ring: the last record that a continuation record may extend.
  local::EventMsg* last_event_ = nullptr;
  local::StepMsg* last_step_ = nullptr;
  local::InputStageMsg* last_input_stage_ = nullptr;
  bool told_input_stages_unsupported_ = false;
  bool told_allocations_unsupported_ = false;
};

}  // namespace podscope::client
