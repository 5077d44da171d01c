// libpodscope: annotations for training processes, read by the podscope agent over its local socket.
//
//   podscope::init({.cores = {rank}, .job = "ring"});      // or env PODSCOPE_CORE_ID / PODSCOPE_JOB
//   for (int64_t step = 0;; ++step) {
//     podscope::Span s = podscope::step(step);              // RAII; s.end() ends it early
//     { auto in = podscope::infeed(); batch = queue.pop(); }
//     { static const auto kMatmul = podscope::intern("matmul"); auto c = podscope::compute(kMatmul, flops); ... }
//     { auto ar = podscope::all_reduce(step, bytes); ... }
//   }
//
// Input pipelines (a DataLoader, a C++ loader; on any thread) annotate their stages as a tree:
//   static const auto kBatch = podscope::intern("batch"), kRead = podscope::intern("read_shard");
//   auto batch = podscope::input_stage(kBatch, podscope::InputStageCategory::kPreprocess);
//   { auto r = podscope::input_stage(kRead, podscope::InputStageCategory::kRead, batch.input_stage_id()); ... }
//
// Allocators (any framework's) feed the memory profile:
//   static const auto kPool = podscope::intern("host_pinned");
//   void* p = pool.get(n);  podscope::alloc(n, reinterpret_cast<uint64_t>(p), kPool);
//   podscope::free(reinterpret_cast<uint64_t>(p), kPool);  pool.put(p);
//
// Cost: with no agent or no capture open, a span is one relaxed atomic load (step, infeed and all-reduce
// spans also read the TSC while an agent is connected: they feed the continuous step metrics). During a
// capture a span writes one 32-byte record into a per-thread lock-free ring; a background thread converts
// ticks to Unix ns, batches, and sends frames to the agent without ever blocking the annotating thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#else
#include <ctime>
#endif

namespace podscope {

struct Options {
  std::vector<int32_t> cores;  // empty: env PODSCOPE_CORE_ID (comma list), else core 0
  std::string job;             // empty: env PODSCOPE_JOB
  std::string socket_path;     // empty: env PODSCOPE_AGENT_SOCKET, else /run/podscope/agent.sock
  size_t buffer_events = 0;    // per-thread ring size (records, rounded up to a power of two); 0: env
                               // PODSCOPE_BUFFER_EVENTS, else 65536 (2 MiB per annotating thread)
  size_t max_threads = 0;      // annotating threads with a ring; 0: 256. Further threads' events are dropped.
};

// Starts the background agent link (a second call while running is ignored, except that it sets the cores
// and job when the link was started by add_capture_window_listener(); after shutdown() it starts again).
// Never blocks on the agent.
void init(const Options& options = {});
// Sends what is buffered (bounded wait) and stops the background thread. Also runs at exit.
void shutdown();
// The core that spans recorded by this thread belong to (default: the first declared core).
void set_thread_core(int32_t core);

// This process serves a framework profiler (tf.profiler.experimental.server.start(port),
// jax.profiler.start_server(port)) on loopback `port`: the local agent forwards its captures there, as to a
// configured `upstream`, while this process is connected, and forgets it when the process ends. Starts the agent
// link as add_capture_window_listener() does; a later call replaces the port.
void announce_profiler(uint16_t port);

using NameId = uint32_t;
// Interns a name for compute/free-form spans and replica groups. Takes a lock: call once, keep the id.
NameId intern(std::string_view name);

// For libraries that trace devices inside this process (libpodscope_cupti): told when the agent opens and
// closes a capture window. Both calls run on libpodscope's background thread, which waits for them: keep
// them short (a CUPTI flush is fine).
class CaptureWindowListener {
 public:
  virtual ~CaptureWindowListener() = default;
  virtual void window_opened() = 0;
  // The window closed, or the agent went away while it was open: stop tracing and return what was traced
  // in it as a serialized tensorflow.profiler.XSpace (empty: nothing; Unix ns on this host's system clock).
  // It is sent to the agent before the process reports the window done, and merged into the capture.
  virtual std::string window_closed() = 0;
};
// Registers `listener` from the next window on (it must live as long as the process). Starts the agent link
// as init() with the environment's settings would, unless it runs already; an init() called later still
// sets this process's cores and job. One link per process: libpodscope_cupti uses this same library.
void add_capture_window_listener(CaptureWindowListener* listener);

// Events dropped since init because a ring was full, a thread had none, or the agent read too slowly.
uint64_t dropped_events();
// True while the agent link is connected; for tests and status lines.
bool agent_connected();

namespace detail {
enum class Kind : uint8_t {
  kStep = 1,
  kInfeed,
  kOutfeed,
  kCompute,
  kAllReduce,
  kSend,
  kRecvDone,
  kFreeForm,
  kInputStage,
  kAllocation,
  kDeallocation
};
// How much the annotations record, as the agent link stands (g_level holds one of these).
enum CaptureLevel : uint8_t {
  kNoAgent = 0,        // nothing
  kStepSpansOnly = 1,  // an agent is connected, no capture window: the step-level spans (steps, infeed, all-reduce)
  kCapturing = 2,      // a capture window is open: everything
};
extern std::atomic<uint8_t> g_level;
inline uint64_t now_tick() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
#endif
}
inline CaptureLevel level_needed(Kind k) {
  return (k == Kind::kStep || k == Kind::kInfeed || k == Kind::kAllReduce) ? kStepSpansOnly : kCapturing;
}
// A new input-stage id, unique in the process and never 0 (only called while a capture records).
uint64_t new_input_stage_id();
struct SpanData {
  uint64_t begin_tick = 0;  // 0: not recording
  int64_t value = 0;
  int64_t value2 = 0;
  uint32_t id = 0;
  uint16_t arg = 0;
  Kind kind = Kind::kFreeForm;
};
void finish(const SpanData& span, uint64_t end_tick);
// Writes one allocation or deallocation record (only called while a capture records).
void record_allocation(Kind kind, int64_t bytes, uint64_t address, NameId allocator, NameId op);
// Marks this thread's step as running (once per step), so a capture closing mid-step waits for its end.
void step_began(uint64_t begin_tick);
}  // namespace detail

// One annotated interval: begins when made, ends at end() or destruction. Movable, so async work can
// carry it to where it completes (explicit begin/end).
class Span {
 public:
  Span() = default;
  Span(detail::Kind kind, uint32_t id, uint16_t arg, int64_t value, int64_t value2 = 0) {
    if (detail::g_level.load(std::memory_order_relaxed) >= detail::level_needed(kind)) {
      d_ = {detail::now_tick(), value, value2, id, arg, kind};
      if (kind == detail::Kind::kInputStage) d_.value = static_cast<int64_t>(detail::new_input_stage_id());
    }
  }
  Span(Span&& o) noexcept : d_(std::exchange(o.d_, {})) {}
  Span& operator=(Span&& o) noexcept {
    if (this != &o) {
      end();
      d_ = std::exchange(o.d_, {});
    }
    return *this;
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  ~Span() { end(); }

  void end() {
    if (d_.begin_tick != 0) {
      detail::finish(d_, detail::now_tick());
      d_.begin_tick = 0;
    }
  }
  bool recording() const { return d_.begin_tick != 0; }
  uint64_t begin_tick() const { return d_.begin_tick; }
  // The id that stages nested in this input stage name as their parent; 0 when it does not record (a
  // stage naming parent 0 is a root).
  uint64_t input_stage_id() const {
    return d_.kind == detail::Kind::kInputStage && d_.begin_tick != 0 ? static_cast<uint64_t>(d_.value) : 0;
  }

 private:
  detail::SpanData d_;
};

NameId train_name();  // "train", the step name TF uses

// The step marker (name "train" unless given): every span of this core inside it carries its step_num.
[[nodiscard]] inline Span step(int64_t step_num, NameId name = 0) {
  Span s(detail::Kind::kStep, name, 0, step_num);
  if (s.begin_tick() != 0) detail::step_began(s.begin_tick());
  return s;
}
[[nodiscard]] inline Span infeed(int64_t bytes = 0) { return Span(detail::Kind::kInfeed, 0, 0, bytes); }
[[nodiscard]] inline Span outfeed(int64_t bytes = 0) { return Span(detail::Kind::kOutfeed, 0, 0, bytes); }
[[nodiscard]] inline Span compute(NameId name, int64_t flops = 0, int64_t bytes = 0) {
  return Span(detail::Kind::kCompute, name, 0, flops, bytes);
}
// `all_reduce_id` is shared by every participant of this collective in this step (e.g. the step number);
// `replica_group` is an interned name such as "{0,1,2,3}" (0: none).
[[nodiscard]] inline Span all_reduce(int64_t all_reduce_id, int64_t bytes, NameId replica_group = 0) {
  return Span(detail::Kind::kAllReduce, static_cast<uint32_t>(all_reduce_id), static_cast<uint16_t>(replica_group),
              bytes);
}
// Channel ids follow XLA: one per distinct (source, destination, phase, chunk) transfer, the same every step.
[[nodiscard]] inline Span send(uint32_t channel_id, int32_t dst_core, int64_t bytes) {
  return Span(detail::Kind::kSend, channel_id, static_cast<uint16_t>(dst_core), bytes);
}
[[nodiscard]] inline Span recv_done(uint32_t channel_id, int32_t src_core, int64_t bytes) {
  return Span(detail::Kind::kRecvDone, channel_id, static_cast<uint16_t>(src_core), bytes);
}
[[nodiscard]] inline Span trace(NameId name) { return Span(detail::Kind::kFreeForm, name, 0, 0); }

// What an input stage does, as the input-pipeline analysis groups its time.
enum class InputStageCategory : uint8_t { kRead = 0, kPreprocess = 1, kEnqueue = 2 };
// One stage of an input pipeline, named `name` (interned), nested in the stage whose input_stage_id() is
// `parent_stage_id` (0: a root stage, e.g. one batch). Recorded during captures only.
[[nodiscard]] inline Span input_stage(NameId name, InputStageCategory category, uint64_t parent_stage_id = 0) {
  return Span(detail::Kind::kInputStage, name, static_cast<uint16_t>(category), 0,
              static_cast<int64_t>(parent_stage_id));
}

// The allocation hook: an allocator reports each block it hands out and takes back, for the memory profile
// (TensorFlow's MemoryAllocation / MemoryDeallocation events on the host plane, with the allocator's running
// total of live bytes). `allocator` is an interned name ("GPU_0_bfc", "host_pinned") and the same for a
// block's alloc and free; `op` (interned, optional) is what the block was allocated for. Recorded during
// captures only: otherwise one relaxed atomic load. A block freed in a capture that did not see it allocated
// is counted by the agent, never subtracted.
inline void alloc(int64_t bytes, uint64_t address, NameId allocator, NameId op = 0) {
  if (detail::g_level.load(std::memory_order_relaxed) >= detail::kCapturing)
    detail::record_allocation(detail::Kind::kAllocation, bytes, address, allocator, op);
}
inline void free(uint64_t address, NameId allocator) {
  if (detail::g_level.load(std::memory_order_relaxed) >= detail::kCapturing)
    detail::record_allocation(detail::Kind::kDeallocation, 0, address, allocator, 0);
}

}  // namespace podscope
