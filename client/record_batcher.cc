#include "client/record_batcher.h"

#include <algorithm>
#include <cstdio>

#include "client/podscope.h"

namespace podscope::client {
namespace {

constexpr size_t kMaxEventsPerFrame = 16384;  // 16384 × 44 B stays well under the 1 MiB frame cap
constexpr size_t kMaxStepsPerFrame = 16384;   // a step is 44 B too: a loop of tiny steps must not outgrow a frame

// The records of each batch frame.
std::vector<local::EventMsg>& records_of(local::EventsMsg& batch) { return batch.events; }
std::vector<local::InputStageMsg>& records_of(local::InputStagesMsg& batch) { return batch.stages; }
std::vector<local::AllocationMsg>& records_of(local::AllocationsMsg& batch) { return batch.allocations; }

}  // namespace

void RecordBatcher::drain(AgentLink& link, std::optional<uint64_t> window_session) {
  ProcessRegistry::Snapshot registered = registry_.snapshot();
  link_ = &link;
  window_session_ = window_session;
  cores_ = std::move(registered.cores);
  std::vector<CoreBatches> batches;  // per core index of the ring being drained
  for (auto& ring : registered.rings) {
    batches.clear();
    last_event_ = nullptr;
    last_step_ = nullptr;
    last_input_stage_ = nullptr;
    ring->drain([&](const RawEvent& e) { add_record(e, *ring, batches); });
    for (auto& b : batches) {
      queue_batch(b.events);
      queue_batch(b.input_stages);
      queue_batch(b.allocations);
    }
  }
  queue_steps();
  registry_.free_retired_rings();
}

void RecordBatcher::add_record(const RawEvent& e, ThreadRing& ring, std::vector<CoreBatches>& batches) {
  if (e.kind == kContinuation) return extend_last_record(e);
  last_step_ = nullptr;
  last_event_ = nullptr;
  last_input_stage_ = nullptr;
  const int32_t core = e.core_index < cores_.size() ? cores_[e.core_index] : 0;
  // Both ends through the one monotonic conversion, so spans of a thread that follow in ticks follow in ns.
  const int64_t start = clock_.to_unix_ns(e.begin_tick);
  const int64_t duration = e.end_tick >= e.begin_tick ? clock_.to_unix_ns(e.end_tick) - start : 0;
  const auto kind = static_cast<detail::Kind>(e.kind);
  if (kind == detail::Kind::kStep) {
    if (steps_.size() >= kMaxStepsPerFrame) queue_steps();
    steps_.push_back(local::StepMsg{core, e.value, start, start + duration, 0, 0});
    last_step_ = &steps_.back();
  }
  if (!window_session_) return;
  if (batches.size() <= e.core_index) batches.resize(e.core_index + 1u);
  CoreBatches& core_batches = batches[e.core_index];
  core_batches.events.core = core_batches.input_stages.core = core_batches.allocations.core = core;
  core_batches.events.thread_id = core_batches.input_stages.thread_id = core_batches.allocations.thread_id =
      ring.thread_id();
  if (kind == detail::Kind::kInputStage) return add_input_stage(e, start, duration, core_batches);
  if (kind == detail::Kind::kAllocation || kind == detail::Kind::kDeallocation)
    return add_allocation(e, start, core_batches);
  add_event(e, start, duration, core_batches);
}

void RecordBatcher::extend_last_record(const RawEvent& e) {
  if (last_step_) {
    last_step_->infeed_ns = clock_.ticks_to_ns(e.begin_tick);
    last_step_->all_reduce_ns = clock_.ticks_to_ns(e.end_tick);
  } else if (last_event_) {
    last_event_->value2 = e.value;
  } else if (last_input_stage_) {
    last_input_stage_->parent_id = static_cast<uint64_t>(e.value);
  }
  last_step_ = nullptr;
  last_event_ = nullptr;
  last_input_stage_ = nullptr;
}

void RecordBatcher::add_event(const RawEvent& e, int64_t start_ns, int64_t duration_ns, CoreBatches& batches) {
  local::EventsMsg& batch = with_room(batches.events);
  local::EventMsg m;
  m.kind = static_cast<local::EventKind>(e.kind);
  m.id = e.id;
  m.arg = e.arg;
  m.start_ns = start_ns;
  m.duration_ns = duration_ns;
  m.value = e.value;
  const bool step = m.kind == local::EventKind::kStep;
  if (step && m.id == 0) m.id = kUnnamedStepId;
  const local::EventKindTraits& traits = local::traits_of(m.kind);
  if (local::is_name_id(traits.id)) define_name(m.id, batch.names);
  if (local::is_name_id(traits.arg)) define_name(static_cast<uint32_t>(m.arg), batch.names);
  batch.events.push_back(m);
  if (!step) last_event_ = &batch.events.back();  // a step's continuation extends its Steps record
}

void RecordBatcher::add_input_stage(const RawEvent& e, int64_t start_ns, int64_t duration_ns, CoreBatches& batches) {
  // An agent older than input stages still shows where the time went, by stage name.
  if (agent_lacks(local::FrameType::kInputStages, "input stages",
                  "they are sent as plain annotations, without category or parent,", told_input_stages_unsupported_)) {
    local::EventsMsg& batch = with_room(batches.events);
    define_name(e.id, batch.names);
    batch.events.push_back(local::EventMsg{local::EventKind::kFreeForm, e.id, 0, start_ns, duration_ns, 0, 0});
    return;  // a parent record that follows has nowhere to go
  }
  local::InputStagesMsg& batch = with_room(batches.input_stages);
  define_name(e.id, batch.names);
  batch.stages.push_back(local::InputStageMsg{e.id, static_cast<local::InputStageCategory>(e.arg),
                                              static_cast<uint64_t>(e.value), 0, start_ns, duration_ns});
  last_input_stage_ = &batch.stages.back();
}

void RecordBatcher::add_allocation(const RawEvent& e, int64_t time_ns, CoreBatches& batches) {
  if (agent_lacks(local::FrameType::kAllocations, "allocation records", "they are dropped",
                  told_allocations_unsupported_))
    return;
  if (e.id == 0 || e.value < 0) return;  // no allocator or a negative size: the agent would refuse the whole frame
  local::AllocationsMsg& batch = with_room(batches.allocations);
  define_name(e.id, batch.names);
  define_name(e.arg, batch.names);
  const bool allocation = static_cast<detail::Kind>(e.kind) == detail::Kind::kAllocation;
  batch.allocations.push_back(
      local::AllocationMsg{allocation ? local::AllocationOp::kAllocate : local::AllocationOp::kFree, e.id, e.arg,
                           e.end_tick,  // the address rides where a span keeps its end
                           allocation ? e.value : 0, time_ns});
}

bool RecordBatcher::agent_lacks(local::FrameType type, const char* records, const char* meanwhile, bool& told) {
  if (!link_->connected() || local::version_has(link_->version(), type)) return false;
  if (!std::exchange(told, true)) {
    std::fprintf(stderr,
                 "podscope: the agent at %s speaks local protocol version %u; %s need version %u, so %s until the "
                 "agent is upgraded\n",
                 link_->socket_path().c_str(), link_->version(), records, local::first_version_with(type), meanwhile);
  }
  return true;
}

void RecordBatcher::define_name(uint32_t name_id, std::vector<std::pair<uint32_t, std::string>>& names) {
  if (name_id == 0 || std::any_of(names.begin(), names.end(), [&](const auto& n) { return n.first == name_id; }))
    return;
  names.emplace_back(name_id, registry_.name_of(name_id));
}

void RecordBatcher::send(local::Message frame, size_t records) {
  // An agent slower than the application: drop whole frames (counted) rather than grow this process without bound.
  if (link_->queued_bytes() > kMaxQueuedRecordBytes) {
    registry_.count_unsent_drops(records);
  } else if (link_->connected()) {
    link_->queue(frame);
  }
}

void RecordBatcher::queue_steps() {
  if (steps_.empty()) return;
  const size_t steps = steps_.size();
  send(local::StepsMsg{std::move(steps_)}, steps);
  steps_.clear();
  last_step_ = nullptr;
}

template <typename Batch>
void RecordBatcher::queue_batch(Batch& batch) {
  auto& records = records_of(batch);
  if (records.empty()) return;
  const size_t count = records.size();
  send(std::move(batch), count);
  records.clear();
  batch.names.clear();
  last_event_ = nullptr;  // they may point into the records sent
  last_input_stage_ = nullptr;
}

template <typename Batch>
Batch& RecordBatcher::with_room(Batch& batch) {
  if (records_of(batch).size() >= kMaxEventsPerFrame) queue_batch(batch);
  batch.session = *window_session_;
  return batch;
}

}  // namespace podscope::client
