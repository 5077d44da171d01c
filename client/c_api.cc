#include "client/podscope_c.h"

#include <cstddef>

#include "client/podscope.h"

namespace {

using podscope::detail::Kind;
using podscope::detail::SpanData;

static_assert(sizeof(podscope_span) == sizeof(SpanData));
static_assert(offsetof(podscope_span, begin_tick) == offsetof(SpanData, begin_tick));
static_assert(offsetof(podscope_span, value) == offsetof(SpanData, value));
static_assert(offsetof(podscope_span, value2) == offsetof(SpanData, value2));
static_assert(offsetof(podscope_span, id) == offsetof(SpanData, id));
static_assert(offsetof(podscope_span, arg) == offsetof(SpanData, arg));
static_assert(offsetof(podscope_span, kind) == offsetof(SpanData, kind));
static_assert(PODSCOPE_INPUT_READ == static_cast<int>(podscope::InputStageCategory::kRead) &&
              PODSCOPE_INPUT_PREPROCESS == static_cast<int>(podscope::InputStageCategory::kPreprocess) &&
              PODSCOPE_INPUT_ENQUEUE == static_cast<int>(podscope::InputStageCategory::kEnqueue));

podscope_span begin(Kind kind, uint32_t id, uint16_t arg, int64_t value, int64_t value2 = 0) {
  podscope_span s{};
  if (podscope::detail::g_level.load(std::memory_order_relaxed) >= podscope::detail::level_needed(kind)) {
    s = {podscope::detail::now_tick(), value, value2, id, arg, static_cast<uint8_t>(kind), 0};
    if (kind == Kind::kInputStage) s.value = static_cast<int64_t>(podscope::detail::new_input_stage_id());
  }
  return s;
}

}  // namespace

extern "C" {

int podscope_init(const int32_t* cores, size_t core_count, const char* job, const char* socket_path) {
  podscope::Options o;
  if (cores) o.cores.assign(cores, cores + core_count);
  if (job) o.job = job;
  if (socket_path) o.socket_path = socket_path;
  podscope::init(o);
  return 0;
}
void podscope_shutdown(void) { podscope::shutdown(); }
uint32_t podscope_intern(const char* name) { return podscope::intern(name ? name : ""); }
void podscope_set_thread_core(int32_t core) { podscope::set_thread_core(core); }
uint64_t podscope_dropped_events(void) { return podscope::dropped_events(); }
int podscope_agent_connected(void) { return podscope::agent_connected() ? 1 : 0; }
int podscope_announce_profiler(int port) {
  if (port <= 0 || port > 65535) return -1;
  podscope::announce_profiler(static_cast<uint16_t>(port));
  return 0;
}

podscope_span podscope_begin_step(int64_t step_num) {
  podscope_span s = begin(Kind::kStep, 0, 0, step_num);
  if (s.begin_tick != 0) podscope::detail::step_began(s.begin_tick);
  return s;
}
podscope_span podscope_begin_infeed(int64_t bytes) { return begin(Kind::kInfeed, 0, 0, bytes); }
podscope_span podscope_begin_outfeed(int64_t bytes) { return begin(Kind::kOutfeed, 0, 0, bytes); }
podscope_span podscope_begin_compute(uint32_t name_id, int64_t flops, int64_t bytes) {
  return begin(Kind::kCompute, name_id, 0, flops, bytes);
}
podscope_span podscope_begin_all_reduce(int64_t all_reduce_id, int64_t bytes, uint32_t replica_group_name_id) {
  return begin(Kind::kAllReduce, static_cast<uint32_t>(all_reduce_id), static_cast<uint16_t>(replica_group_name_id),
               bytes);
}
podscope_span podscope_begin_send(uint32_t channel_id, int32_t dst_core, int64_t bytes) {
  return begin(Kind::kSend, channel_id, static_cast<uint16_t>(dst_core), bytes);
}
podscope_span podscope_begin_recv_done(uint32_t channel_id, int32_t src_core, int64_t bytes) {
  return begin(Kind::kRecvDone, channel_id, static_cast<uint16_t>(src_core), bytes);
}
podscope_span podscope_begin_trace(uint32_t name_id) { return begin(Kind::kFreeForm, name_id, 0, 0); }
podscope_span podscope_begin_input_stage(uint32_t name_id, int category, uint64_t parent_stage_id) {
  if (category < PODSCOPE_INPUT_READ || category > PODSCOPE_INPUT_ENQUEUE) return podscope_span{};
  return begin(Kind::kInputStage, name_id, static_cast<uint16_t>(category), 0, static_cast<int64_t>(parent_stage_id));
}
uint64_t podscope_input_stage_id(const podscope_span* span) {
  if (!span || span->begin_tick == 0 || span->kind != static_cast<uint8_t>(Kind::kInputStage)) return 0;
  return static_cast<uint64_t>(span->value);
}

void podscope_end(podscope_span* span) {
  if (!span || span->begin_tick == 0) return;
  SpanData d;
  d.begin_tick = span->begin_tick;
  d.value = span->value;
  d.value2 = span->value2;
  d.id = span->id;
  d.arg = span->arg;
  d.kind = static_cast<Kind>(span->kind);
  podscope::detail::finish(d, podscope::detail::now_tick());
  span->begin_tick = 0;
}

void podscope_alloc(int64_t bytes, uint64_t address, uint32_t allocator_name_id, uint32_t op_name_id) {
  podscope::alloc(bytes, address, allocator_name_id, op_name_id);
}
void podscope_free(uint64_t address, uint32_t allocator_name_id) { podscope::free(address, allocator_name_id); }

}  // extern "C"
