#include "client/runtime.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <utility>

namespace podscope {
namespace detail {
std::atomic<uint8_t> g_level{kNoAgent};
}  // namespace detail

namespace client {
namespace {

constexpr auto kDrainPeriod = std::chrono::milliseconds(50);
constexpr size_t kMaxEventsPerFrame = 16384;  // 16384 × 44 B stays well under the 1 MiB frame cap
constexpr size_t kMaxStepsPerFrame = 16384;   // a step is 44 B too: a loop of tiny steps must not outgrow a frame
// What is queued when a capture closes is read by the agent before the client's answer: 4 MiB (about 100 k
// events) keeps that a fraction of a second even with many clients flooding one agent.
constexpr size_t kMaxQueuedEventBytes = 4u << 20;
// How long a closing window waits for steps still running (the agent waits 2 s for the answer).
constexpr auto kStepEndWait = std::chrono::milliseconds(1000);
// The first local protocol version with input stages.
constexpr uint32_t kInputStagesVersion = [] {
  for (const local::VersionFrames& v : local::kVersions)
    if (local::version_has(v.version, local::FrameType::kInputStages)) return v.version;
  return 0u;
}();
// The first local protocol version with allocation records.
constexpr uint32_t kAllocationsVersion = [] {
  for (const local::VersionFrames& v : local::kVersions)
    if (local::version_has(v.version, local::FrameType::kAllocations)) return v.version;
  return 0u;
}();
// The first local protocol version with profiler-server announcements.
constexpr uint32_t kProfilerServerVersion = [] {
  for (const local::VersionFrames& v : local::kVersions)
    if (local::version_has(v.version, local::FrameType::kProfilerServer)) return v.version;
  return 0u;
}();
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
// The name id of a step begun without a name.
constexpr NameId kUnnamedStepId = 1;

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

std::vector<int32_t> cores_from_env() {
  std::vector<int32_t> cores;
  if (const char* env = std::getenv("PODSCOPE_CORE_ID")) {
    std::string s(env);
    size_t at = 0;
    while (at < s.size()) {
      size_t comma = s.find(',', at);
      if (comma == std::string::npos) comma = s.size();
      if (comma > at) cores.push_back(static_cast<int32_t>(std::strtol(s.substr(at, comma - at).c_str(), nullptr, 10)));
      at = comma + 1;
    }
  }
  if (cores.empty()) cores.push_back(0);
  return cores;
}

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

size_t round_up_pow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

std::string program_name() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

}  // namespace

Runtime& Runtime::instance() {
  static Runtime* runtime = new Runtime();  // never destroyed: rings and thread_locals may outlive statics
  return *runtime;
}

Runtime::Runtime() {
  names_.emplace_back("");                                    // id 0: none
  intern(local::traits_of(local::EventKind::kStep).unnamed);  // kUnnamedStepId
}

void Runtime::start(const Options& options, bool implicit) {
  std::lock_guard lock(mu_);
  if (started_ && !stopping_) {
    // Already running: the first init wins, but a device tracer's implicit start has no identity to keep.
    if (!implicit && implicit_start_) {
      implicit_start_ = false;
      if (!options.cores.empty()) cores_ = options.cores;
      if (!options.job.empty()) job_ = options.job;
      reregister_ = true;
    }
    return;
  }
  const bool first_start = !started_;
  started_ = true;
  implicit_start_ = implicit;
  stopping_ = false;
  window_open_ = false;
  cores_ = options.cores.empty() ? cores_from_env() : options.cores;
  job_ = options.job.empty() ? env_or("PODSCOPE_JOB", "") : options.job;
  program_ = program_name();
  size_t events = options.buffer_events;
  if (events == 0)
    events = static_cast<size_t>(std::strtoull(env_or("PODSCOPE_BUFFER_EVENTS", "65536").c_str(), nullptr, 10));
  ring_capacity_ = round_up_pow2(std::max<size_t>(events, 16));
  max_threads_ = options.max_threads == 0 ? 256 : options.max_threads;
  link_ = std::make_unique<AgentLink>(
      options.socket_path.empty() ? env_or("PODSCOPE_AGENT_SOCKET", "/run/podscope/agent.sock") : options.socket_path);
  thread_ = std::thread([this] { run(); });
  if (first_start) std::atexit([] { Runtime::instance().stop(); });
}

void Runtime::add_listener(CaptureWindowListener* listener) {
  {
    std::lock_guard lock(mu_);
    listeners_.push_back(listener);
    if (started_ && !stopping_) return;
  }
  start(Options{}, /*implicit=*/true);
}

void Runtime::stop() {
  {
    std::lock_guard lock(mu_);
    if (!started_ || stopping_.exchange(true)) return;
  }
  if (thread_.joinable()) thread_.join();
  detail::g_level.store(detail::kNoAgent, std::memory_order_relaxed);
}

NameId Runtime::intern(std::string_view name) {
  std::lock_guard lock(mu_);
  auto it = name_ids_.find(std::string(name));
  if (it != name_ids_.end()) return it->second;
  if (names_.size() > 0xffff) return 0;  // ids travel in 16 bits where they name a replica group
  const NameId id = static_cast<NameId>(names_.size());
  names_.emplace_back(name);
  name_ids_.emplace(std::string(name), id);
  return id;
}

std::shared_ptr<ThreadRing> Runtime::new_ring(int64_t thread_id) {
  std::lock_guard lock(mu_);
  if (rings_.size() >= max_threads_) return nullptr;
  rings_.push_back(std::make_shared<ThreadRing>(ring_capacity_, thread_id));
  return rings_.back();
}

uint8_t Runtime::core_index(int32_t core) {
  std::lock_guard lock(mu_);
  auto it = std::find(cores_.begin(), cores_.end(), core);
  if (it != cores_.end()) return static_cast<uint8_t>(it - cores_.begin());
  if (cores_.size() >= 255) return 0;
  cores_.push_back(core);  // a core first named here is declared now
  reregister_ = true;
  return static_cast<uint8_t>(cores_.size() - 1);
}

uint64_t Runtime::total_dropped() const {
  uint64_t total = ringless_drops_.load(std::memory_order_relaxed) + unsent_drops_.load(std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  for (const auto& r : rings_) total += r->dropped();
  return total;
}

local::RegisterMsg Runtime::register_msg() {
  std::lock_guard lock(mu_);
  local::RegisterMsg m;
  m.version = link_->version();
  m.pid = static_cast<int32_t>(::getpid());
  m.program = program_;
  m.job = job_;
  m.cores = cores_;
  return m;
}

bool Runtime::take_reregister() {
  std::lock_guard lock(mu_);
  return std::exchange(reregister_, false);
}

void Runtime::announce_profiler(uint16_t port) {
  {
    std::lock_guard lock(mu_);
    profiler_port_ = port;
    profiler_told_ = false;
    if (started_ && !stopping_) return;
  }
  start(Options{}, /*implicit=*/true);
}

std::optional<local::ProfilerServerMsg> Runtime::take_profiler_announcement(bool new_connection) {
  std::lock_guard lock(mu_);
  if (new_connection) profiler_told_ = false;
  if (profiler_port_ == 0 || std::exchange(profiler_told_, true)) return std::nullopt;
  if (!local::version_has(link_->version(), local::FrameType::kProfilerServer)) {
    std::fprintf(stderr,
                 "podscope: the agent at %s speaks local protocol version %u; announcing the profiler server on "
                 "port %u needs version %u: list it in the agent's `upstream` instead, or upgrade the agent\n",
                 link_->socket_path().c_str(), link_->version(), profiler_port_, kProfilerServerVersion);
    return std::nullopt;
  }
  return local::ProfilerServerMsg{profiler_port_};
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
      link_->queue(register_msg());
      window_open_ = false;
      detail::g_level.store(detail::kStepSpansOnly, std::memory_order_relaxed);
      connected_.store(true, std::memory_order_relaxed);
    }
    if (link_->connected() && take_reregister()) link_->queue(register_msg());
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
    dropped_at_open_ = total_dropped();
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
    std::lock_guard lock(mu_);
    for (const auto& r : rings_) {
      const uint64_t open = r->open_step_tick.load(std::memory_order_relaxed);
      if (open != 0 && open < close_tick_ && !r->retired.load(std::memory_order_relaxed)) return;
    }
  }
  drain_rings();
  if (!recording()) collect_device_planes(/*discard=*/false);
  window_open_ = false;
  closing_ = false;
  link_->queue(local::CaptureDoneMsg{session_, total_dropped() - dropped_at_open_});
}

void Runtime::notify_window_opened() {
  std::vector<CaptureWindowListener*> listeners;
  {
    std::lock_guard lock(mu_);
    listeners = listeners_;
  }
  for (CaptureWindowListener* l : listeners) l->window_opened();
}

void Runtime::collect_device_planes(bool discard) {
  std::vector<CaptureWindowListener*> listeners;
  {
    std::lock_guard lock(mu_);
    listeners = listeners_;
  }
  for (CaptureWindowListener* l : listeners) {
    const std::string bytes = l->window_closed();
    if (!discard && !bytes.empty()) send_device_space(bytes);
  }
}

void Runtime::send_device_space(const std::string& bytes) {
  // In chunks under the frame limit, writing as the agent reads, so that a large space never trips the
  // link's queue cap. Bounded: the agent gives up on the window 2 s after closing it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  for (size_t offset = 0; offset < bytes.size() && link_->connected(); offset += local::kDevicePlanesChunkBytes) {
    while (link_->connected() && link_->queued_bytes() > kMaxQueuedEventBytes) {
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

void Runtime::drain_rings() {
  std::vector<std::shared_ptr<ThreadRing>> rings;
  {
    std::lock_guard lock(mu_);
    rings = rings_;
    drain_cores_ = cores_;
  }
  std::vector<CoreBatches> batches;  // per core index of the ring being drained
  for (auto& ring : rings) {
    batches.clear();
    last_event_ = nullptr;
    last_step_ = nullptr;
    last_input_stage_ = nullptr;
    ring->drain([&](const RawEvent& e) { add_event(e, *ring, batches); });
    for (auto& b : batches) {
      if (!b.events.events.empty()) queue_events(b.events);
      if (!b.input_stages.stages.empty()) queue_input_stages(b.input_stages);
      if (!b.allocations.allocations.empty()) queue_allocations(b.allocations);
    }
  }
  queue_steps();
  std::lock_guard lock(mu_);
  std::erase_if(rings_, [](const auto& r) { return r->retired.load(std::memory_order_acquire) && r->empty(); });
}

void Runtime::add_event(const RawEvent& e, ThreadRing& ring, std::vector<CoreBatches>& batches) {
  if (e.kind == kContinuation) {
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
    return;
  }
  last_step_ = nullptr;
  last_event_ = nullptr;
  last_input_stage_ = nullptr;
  const int32_t core = e.core_index < drain_cores_.size() ? drain_cores_[e.core_index] : 0;
  // Both ends through the one monotonic conversion, so spans of a thread that follow in ticks follow in ns.
  const int64_t start = clock_.to_unix_ns(e.begin_tick);
  const int64_t duration = e.end_tick >= e.begin_tick ? clock_.to_unix_ns(e.end_tick) - start : 0;
  const auto kind = static_cast<detail::Kind>(e.kind);
  if (kind == detail::Kind::kStep) {
    if (steps_.size() >= kMaxStepsPerFrame) queue_steps();
    steps_.push_back(local::StepMsg{core, e.value, start, start + duration, 0, 0});
    last_step_ = &steps_.back();
  }
  if (!window_open_) return;
  if (batches.size() <= e.core_index) batches.resize(e.core_index + 1u);
  CoreBatches& core_batches = batches[e.core_index];
  core_batches.events.core = core_batches.input_stages.core = core_batches.allocations.core = core;
  core_batches.events.thread_id = core_batches.input_stages.thread_id = core_batches.allocations.thread_id =
      ring.thread_id();
  if (kind == detail::Kind::kInputStage) return add_input_stage(e, start, duration, core_batches);
  if (kind == detail::Kind::kAllocation || kind == detail::Kind::kDeallocation)
    return add_allocation(e, start, core_batches);
  local::EventsMsg& batch = core_batches.events;
  if (batch.events.size() >= kMaxEventsPerFrame) queue_events(batch);
  batch.session = session_;
  local::EventMsg m;
  m.kind = static_cast<local::EventKind>(e.kind);
  m.id = e.id;
  m.arg = e.arg;
  m.start_ns = start;
  m.duration_ns = duration;
  m.value = e.value;
  if (kind == detail::Kind::kStep && m.id == 0) m.id = kUnnamedStepId;
  const local::EventKindTraits& traits = local::traits_of(m.kind);
  if (local::is_name_id(traits.id)) define_name(m.id, batch.names);
  if (local::is_name_id(traits.arg)) define_name(static_cast<uint32_t>(m.arg), batch.names);
  batch.events.push_back(m);
  if (kind == detail::Kind::kStep) {
    last_step_ = &steps_.back();
  } else {
    last_event_ = &batch.events.back();
  }
}

void Runtime::add_input_stage(const RawEvent& e, int64_t start_ns, int64_t duration_ns, CoreBatches& batches) {
  if (link_->connected() && !local::version_has(link_->version(), local::FrameType::kInputStages)) {
    // An agent older than input stages still shows where the time went, by stage name.
    if (!std::exchange(told_input_stages_unsupported_, true)) {
      std::fprintf(stderr,
                   "podscope: the agent at %s speaks local protocol version %u; input stages need version %u, so "
                   "they are sent as plain annotations, without category or parent, until the agent is upgraded\n",
                   link_->socket_path().c_str(), link_->version(), kInputStagesVersion);
    }
    local::EventsMsg& batch = batches.events;
    if (batch.events.size() >= kMaxEventsPerFrame) queue_events(batch);
    batch.session = session_;
    define_name(e.id, batch.names);
    batch.events.push_back(local::EventMsg{local::EventKind::kFreeForm, e.id, 0, start_ns, duration_ns, 0, 0});
    return;  // a parent record that follows has nowhere to go
  }
  local::InputStagesMsg& batch = batches.input_stages;
  if (batch.stages.size() >= kMaxEventsPerFrame) queue_input_stages(batch);
  batch.session = session_;
  define_name(e.id, batch.names);
  batch.stages.push_back(local::InputStageMsg{e.id, static_cast<local::InputStageCategory>(e.arg),
                                              static_cast<uint64_t>(e.value), 0, start_ns, duration_ns});
  last_input_stage_ = &batch.stages.back();
}

void Runtime::add_allocation(const RawEvent& e, int64_t time_ns, CoreBatches& batches) {
  if (link_->connected() && !local::version_has(link_->version(), local::FrameType::kAllocations)) {
    if (!std::exchange(told_allocations_unsupported_, true)) {
      std::fprintf(stderr,
                   "podscope: the agent at %s speaks local protocol version %u; allocation records need version %u, "
                   "so they are dropped until the agent is upgraded\n",
                   link_->socket_path().c_str(), link_->version(), kAllocationsVersion);
    }
    return;
  }
  if (e.id == 0 || e.value < 0) return;  // no allocator or a negative size: the agent would refuse the whole frame
  local::AllocationsMsg& batch = batches.allocations;
  if (batch.allocations.size() >= kMaxEventsPerFrame) queue_allocations(batch);
  batch.session = session_;
  define_name(e.id, batch.names);
  define_name(e.arg, batch.names);
  const bool allocation = static_cast<detail::Kind>(e.kind) == detail::Kind::kAllocation;
  batch.allocations.push_back(
      local::AllocationMsg{allocation ? local::AllocationOp::kAllocate : local::AllocationOp::kFree, e.id, e.arg,
                           e.end_tick,  // the address rides where a span keeps its end
                           allocation ? e.value : 0, time_ns});
}

void Runtime::define_name(uint32_t name_id, std::vector<std::pair<uint32_t, std::string>>& names) {
  if (name_id == 0 || std::any_of(names.begin(), names.end(), [&](const auto& n) { return n.first == name_id; }))
    return;
  std::lock_guard lock(mu_);
  names.emplace_back(name_id, name_id < names_.size() ? names_[name_id] : std::string());
}

void Runtime::queue_steps() {
  if (steps_.empty()) return;
  // As for events: an agent slower than the application loses whole batches (counted), never grows this process.
  if (link_->queued_bytes() > kMaxQueuedEventBytes) {
    unsent_drops_.fetch_add(steps_.size(), std::memory_order_relaxed);
  } else if (link_->connected()) {
    link_->queue(local::StepsMsg{std::move(steps_)});
  }
  steps_.clear();
  last_step_ = nullptr;
}

template <typename Batch, typename Record>
void Runtime::queue_batch(Batch& batch, std::vector<Record>& records) {
  // An agent slower than the application: drop whole batches (counted) rather than grow without bound.
  if (link_->queued_bytes() > kMaxQueuedEventBytes) {
    unsent_drops_.fetch_add(records.size(), std::memory_order_relaxed);
  } else if (link_->connected()) {
    link_->queue(batch);
  }
  records.clear();
  batch.names.clear();
}

void Runtime::queue_events(local::EventsMsg& batch) {
  queue_batch(batch, batch.events);
  last_event_ = nullptr;
}

void Runtime::queue_input_stages(local::InputStagesMsg& batch) {
  queue_batch(batch, batch.stages);
  last_input_stage_ = nullptr;
}

void Runtime::queue_allocations(local::AllocationsMsg& batch) { queue_batch(batch, batch.allocations); }

}  // namespace client

void init(const Options& options) { client::Runtime::instance().start(options); }
void shutdown() { client::Runtime::instance().stop(); }
NameId intern(std::string_view name) { return client::Runtime::instance().intern(name); }
NameId train_name() { return 1; }
void announce_profiler(uint16_t port) { client::Runtime::instance().announce_profiler(port); }
void add_capture_window_listener(CaptureWindowListener* listener) {
  client::Runtime::instance().add_listener(listener);
}
uint64_t dropped_events() { return client::Runtime::instance().total_dropped(); }
bool agent_connected() { return client::Runtime::instance().connected(); }

void set_thread_core(int32_t core) { client::t_state.core_index = client::Runtime::instance().core_index(core); }

namespace client {
namespace {
// The calling thread's ring, created on first use (null when max_threads rings exist).
ThreadRing* ring_of(ThreadState& t) {
  if (!t.ring && !t.ring_tried) {
    t.ring_tried = true;
    t.ring = Runtime::instance().new_ring(static_cast<int64_t>(::syscall(SYS_gettid)));
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
    client::Runtime::instance().count_ringless_drop();
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
    client::Runtime::instance().count_ringless_drop();
    return;
  }
  // Names are interned below 2^16 (Runtime::intern), so the op fits the record's 16-bit argument.
  const client::RawEvent record{
      now_tick(), address, bytes, allocator, static_cast<uint16_t>(op), static_cast<uint8_t>(kind), t.core_index};
  ring->push(&record, 1);
}

}  // namespace detail
}  // namespace podscope
