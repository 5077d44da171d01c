#include "client/runtime.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace podscope {
namespace detail {
std::atomic<uint8_t> g_level{kNoAgent};
}  // namespace detail

namespace client {
namespace {

constexpr auto kDrainPeriod = std::chrono::milliseconds(50);
// How long a closing window waits for steps still running (the agent waits 2 s for the answer).
constexpr auto kStepEndWait = std::chrono::milliseconds(1000);
// The public enums travel as the wire's values.
constexpr bool same_value(auto a, auto b) { return static_cast<uint8_t>(a) == static_cast<uint8_t>(b); }
static_assert(same_value(InputStageCategory::kRead, local::InputStageCategory::kRead) &&
              same_value(InputStageCategory::kPreprocess, local::InputStageCategory::kPreprocess) &&
              same_value(InputStageCategory::kEnqueue, local::InputStageCategory::kEnqueue));
constexpr std::pair<detail::Kind, local::EventKind> kKindsOnWire[] = {
    {detail::Kind::kStep, local::EventKind::kStep},
    {detail::Kind::kInfeed, local::EventKind::kInfeed},
    {detail::Kind::kOutfeed, local::EventKind::kOutfeed},
    {detail::Kind::kCompute, local::EventKind::kCompute},
    {detail::Kind::kAllReduce, local::EventKind::kAllReduce},
    {detail::Kind::kSend, local::EventKind::kSend},
    {detail::Kind::kRecvDone, local::EventKind::kRecvDone},
    {detail::Kind::kFreeForm, local::EventKind::kFreeForm},
    {detail::Kind::kInputStage, local::EventKind::kInputStage},
    {detail::Kind::kAllocation, local::EventKind::kAllocation},
    {detail::Kind::kDeallocation, local::EventKind::kDeallocation},
};
static_assert(
    [] {
      if (std::size(kKindsOnWire) != std::size(local::kEventKinds)) return false;
      for (size_t i = 0; i < std::size(kKindsOnWire); ++i)
        if (!same_value(kKindsOnWire[i].first, kKindsOnWire[i].second) ||
            kKindsOnWire[i].second != local::kEventKinds[i].kind)
          return false;
      return true;
    }(),
    "every public kind travels as the wire kind of its name, and every wire kind has one");
// What one annotating thread keeps: its ring, its core, and the step tallies.
struct ThreadState {
  std::shared_ptr<ThreadRing> ring;
  bool ring_tried = false;
  uint8_t core_index = 0;
  uint64_t infeed_ticks = 0;
  uint64_t all_reduce_ticks = 0;
  ~ThreadState() {
    if (ring) ring->retired.store(true, std::memory_order_release);
  }
};
thread_local ThreadState t_state;
// Apart from t_state, whose destructor makes every access check that it was constructed.
thread_local uint64_t t_next_input_stage_id = 0;  // the last input-stage id this thread made; 0: none yet
std::atomic<uint64_t> g_input_stage_threads{0};   // threads that made input stages

}  // namespace

Runtime& Runtime::instance() {
  static Runtime* runtime = new Runtime();  // never destroyed: rings and thread_locals may outlive statics
  return *runtime;
}

void Runtime::start(const Options& options, bool implicit) {
  std::lock_guard lock(lifecycle_mu_);
  if (started_ && !stopping_) {
    // Already running: the first init wins, but a device tracer's implicit start has no identity to keep.
    if (!implicit && implicit_start_) {
      implicit_start_ = false;
      registry_.adopt_identity(options);
    }
    return;
  }
  const bool first_start = !started_;
  started_ = true;
  implicit_start_ = implicit;
  stopping_ = false;
  window_open_ = false;
  registry_.configure(options);
  std::string socket_path = options.socket_path;
  if (socket_path.empty()) {
    const char* env = std::getenv("PODSCOPE_AGENT_SOCKET");
    socket_path = env && *env ? env : "/run/podscope/agent.sock";
  }
  link_ = std::make_unique<AgentLink>(socket_path);
  thread_ = std::thread([this] { run(); });
  if (first_start) std::atexit([] { Runtime::instance().stop(); });
}

void Runtime::start_implicitly() {
  {
    std::lock_guard lock(lifecycle_mu_);
    if (started_ && !stopping_) return;
  }
  start(Options{}, /*implicit=*/true);
}

void Runtime::add_listener(CaptureWindowListener* listener) {
  registry_.add_listener(listener);
  start_implicitly();
}

void Runtime::announce_profiler(uint16_t port) {
  registry_.announce_profiler(port);
  start_implicitly();
}

void Runtime::stop() {
  {
    std::lock_guard lock(lifecycle_mu_);
    if (!started_ || stopping_.exchange(true)) return;
  }
  if (thread_.joinable()) thread_.join();
  detail::g_level.store(detail::kNoAgent, std::memory_order_relaxed);
}

std::optional<local::ProfilerServerMsg> Runtime::take_profiler_announcement(bool new_connection) {
  const std::optional<uint16_t> port = registry_.take_profiler_port(new_connection);
  if (!port) return std::nullopt;
  if (!local::version_has(link_->version(), local::FrameType::kProfilerServer)) {
    std::fprintf(stderr,
                 "podscope: the agent at %s speaks local protocol version %u; announcing the profiler server on "
                 "port %u needs version %u: list it in the agent's `upstream` instead, or upgrade the agent\n",
                 link_->socket_path().c_str(), link_->version(), *port,
                 local::first_version_with(local::FrameType::kProfilerServer));
    return std::nullopt;
  }
  return local::ProfilerServerMsg{*port};
}

void Runtime::run() {
  std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a first tick-rate baseline
  clock_.calibrate();
  auto next_drain = std::chrono::steady_clock::now();
  std::vector<local::Message> incoming;
  bool last_round = false;
  for (;;) {
    const bool stopping = stopping_.load(std::memory_order_relaxed);
    const auto now = std::chrono::steady_clock::now();
    if (!stopping) link_->try_connect(now);
    incoming.clear();
    if (link_->open()) {
      link_->pump(10, incoming);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const bool new_connection = link_->take_new_connection();
    if (new_connection) {  // a version is agreed: register before anything else
      link_->queue(registry_.register_msg(link_->version()));
      window_open_ = false;
      detail::g_level.store(detail::kStepSpansOnly, std::memory_order_relaxed);
      connected_.store(true, std::memory_order_relaxed);
    }
    if (link_->connected() && registry_.take_reregister()) link_->queue(registry_.register_msg(link_->version()));
    if (link_->connected()) {
      if (auto announcement = take_profiler_announcement(new_connection)) link_->queue(*announcement);
    }
    if (!link_->connected()) {
      if (detail::g_level.load(std::memory_order_relaxed) != detail::kNoAgent)
        detail::g_level.store(detail::kNoAgent, std::memory_order_relaxed);
      connected_.store(false, std::memory_order_relaxed);
      if (window_open_ && !recording()) collect_device_planes(/*discard=*/true);  // device tracers stop with the agent
      window_open_ = false;
      closing_ = false;
    }
    for (const auto& msg : incoming) handle(msg);
    while (!deferred_.empty()) {
      const std::vector<local::Message> later = std::move(deferred_);
      deferred_.clear();
      for (const auto& msg : later) handle(msg);
    }
    if (closing_) finish_window_if_steps_ended(stopping);
    if (stopping || std::chrono::steady_clock::now() >= next_drain) {
      clock_.calibrate();
      drain_rings();
      next_drain = std::chrono::steady_clock::now() + kDrainPeriod;
    }
    if (last_round) break;
    if (stopping) {
      // Flush what is queued, bounded: the application is exiting.
      detail::g_level.store(detail::kNoAgent, std::memory_order_relaxed);
      drain_rings();
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      while (link_->connected() && link_->queued_bytes() > 0 && std::chrono::steady_clock::now() < deadline) {
        incoming.clear();
        link_->pump(10, incoming);
      }
      last_round = true;
    }
  }
  link_->disconnect();
}

void Runtime::handle(const local::Message& msg) {
  if (const auto* open = std::get_if<local::CaptureOpenMsg>(&msg)) {
    if (closing_) finish_window_if_steps_ended(/*force=*/true);
    drain_rings();  // what was recorded before the window is not part of it
    session_ = open->session;
    window_open_ = true;
    dropped_at_open_ = registry_.total_dropped();
    detail::g_level.store(detail::kCapturing, std::memory_order_relaxed);
    if (!recording()) notify_window_opened();
  } else if (const auto* close = std::get_if<local::CaptureCloseMsg>(&msg)) {
    if (!window_open_ || closing_ || close->session != session_) return;
    detail::g_level.store(detail::kStepSpansOnly, std::memory_order_relaxed);
    closing_ = true;
    close_tick_ = detail::now_tick();
    close_deadline_ = std::chrono::steady_clock::now() + kStepEndWait;
    finish_window_if_steps_ended(false);
  }
}

void Runtime::finish_window_if_steps_ended(bool force) {
  if (!force && std::chrono::steady_clock::now() < close_deadline_) {
    if (registry_.thread_in_step_begun_before(close_tick_)) return;
  }
  drain_rings();
  if (!recording()) collect_device_planes(/*discard=*/false);
  window_open_ = false;
  closing_ = false;
  link_->queue(local::CaptureDoneMsg{session_, registry_.total_dropped() - dropped_at_open_});
}

void Runtime::notify_window_opened() {
  for (CaptureWindowListener* l : registry_.listeners()) l->window_opened();
}

void Runtime::collect_device_planes(bool discard) {
  for (CaptureWindowListener* l : registry_.listeners()) {
    const std::string bytes = l->window_closed();
    if (!discard && !bytes.empty()) send_device_space(bytes);
  }
}

void Runtime::send_device_space(const std::string& bytes) {
  // In chunks under the frame limit, writing as the agent reads, so that a large space never trips the
  // link's queue cap. Bounded: the agent gives up on the window 2 s after closing it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  for (size_t offset = 0; offset < bytes.size() && link_->connected(); offset += local::kDevicePlanesChunkBytes) {
    while (link_->connected() && link_->queued_bytes() > kMaxQueuedRecordBytes) {
      if (std::chrono::steady_clock::now() >= deadline) return;  // the agent reports the space incomplete
      link_->pump(10, deferred_);
    }
    local::DevicePlanesMsg chunk;
    chunk.session = session_;
    chunk.total_bytes = bytes.size();
    chunk.offset = offset;
    chunk.chunk = bytes.substr(offset, local::kDevicePlanesChunkBytes);
    link_->queue(chunk);
  }
}

void Runtime::drain_rings() { batcher_.drain(*link_, window_open_ ? std::optional(session_) : std::nullopt); }

}  // namespace client

void init(const Options& options) { client::Runtime::instance().start(options); }
void shutdown() { client::Runtime::instance().stop(); }
NameId intern(std::string_view name) { return client::Runtime::instance().registry().intern(name); }
NameId train_name() { return client::kUnnamedStepId; }
void announce_profiler(uint16_t port) { client::Runtime::instance().announce_profiler(port); }
void add_capture_window_listener(CaptureWindowListener* listener) {
  client::Runtime::instance().add_listener(listener);
}
uint64_t dropped_events() { return client::Runtime::instance().registry().total_dropped(); }
bool agent_connected() { return client::Runtime::instance().connected(); }

void set_thread_core(int32_t core) {
  client::t_state.core_index = client::Runtime::instance().registry().core_index(core);
}

namespace client {
namespace {
// The calling thread's ring, created on first use (null when max_threads rings exist).
ThreadRing* ring_of(ThreadState& t) {
  if (!t.ring && !t.ring_tried) {
    t.ring_tried = true;
    t.ring = Runtime::instance().registry().new_ring(static_cast<int64_t>(::syscall(SYS_gettid)));
  }
  return t.ring.get();
}
}  // namespace
}  // namespace client

namespace detail {

void step_began(uint64_t begin_tick) {
  if (client::ThreadRing* ring = client::ring_of(client::t_state)) {
    ring->open_step_tick.store(begin_tick, std::memory_order_relaxed);
  }
}

uint64_t new_input_stage_id() {
  // A thread ordinal above a per-thread count: unique without touching shared memory after the first stage
  // (until a thread makes 2^40 stages).
  uint64_t& next = client::t_next_input_stage_id;
  if (next == 0) next = (client::g_input_stage_threads.fetch_add(1, std::memory_order_relaxed) + 1) << 40;
  return ++next;
}

void finish(const SpanData& span, uint64_t end_tick) {
  client::ThreadState& t = client::t_state;
  const uint64_t ticks = end_tick - span.begin_tick;
  if (span.kind == Kind::kInfeed) t.infeed_ticks += ticks;
  if (span.kind == Kind::kAllReduce) t.all_reduce_ticks += ticks;
  if (span.kind == Kind::kStep && t.ring) t.ring->open_step_tick.store(0, std::memory_order_relaxed);
  const uint8_t level = g_level.load(std::memory_order_relaxed);
  if (level < level_needed(span.kind) || (level < kCapturing && span.kind != Kind::kStep)) return;
  client::ThreadRing* ring = client::ring_of(t);
  if (!ring) {
    client::Runtime::instance().registry().count_ringless_drop();
    return;
  }
  client::RawEvent records[2];
  records[0] = {span.begin_tick, end_tick, span.value, span.id, span.arg, static_cast<uint8_t>(span.kind),
                t.core_index};
  size_t n = 1;
  if (span.kind == Kind::kStep) {
    records[1] = {t.infeed_ticks, t.all_reduce_ticks, 0, 0, 0, client::kContinuation, t.core_index};
    n = 2;
    t.infeed_ticks = t.all_reduce_ticks = 0;
  } else if ((span.kind == Kind::kCompute || span.kind == Kind::kInputStage) && span.value2 != 0) {
    records[1] = {0, 0, span.value2, 0, 0, client::kContinuation, t.core_index};  // bytes; parent stage id
    n = 2;
  }
  ring->push(records, n);
}

void record_allocation(Kind kind, int64_t bytes, uint64_t address, NameId allocator, NameId op) {
  client::ThreadState& t = client::t_state;
  client::ThreadRing* ring = client::ring_of(t);
  if (!ring) {
    client::Runtime::instance().registry().count_ringless_drop();
    return;
  }
  // Names are interned below 2^16 (ProcessRegistry::intern), so the op fits the record's 16-bit argument.
  const client::RawEvent record{
      now_tick(), address, bytes, allocator, static_cast<uint16_t>(op), static_cast<uint8_t>(kind), t.core_index};
  ring->push(&record, 1);
}

}  // namespace detail
}  // namespace podscope
