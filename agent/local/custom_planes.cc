#include "agent/local/custom_planes.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "proto/xspace/allocator_events.h"
#include "proto/xspace/names.h"
#include "proto/xspace/saturating.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::agent {
namespace {

using local::EventKind;

struct PlacedEvent {
  const HeldEvent* event;
  const HeldClientEvents* client;
  int64_t start_ns;  // agent clock
};

struct StepSpan {
  int64_t step_num, start_ns, end_ns;
};

std::string_view name_of(const HeldClientEvents& client, uint32_t index) {
  return index < client.names.size() ? std::string_view(client.names[index]) : std::string_view();
}

// An event's name: its name id's (or its kind's name for none), else its kind's fixed name.
std::string_view op_name(const PlacedEvent& p) {
  const local::EventKindTraits& traits = local::traits_of(p.event->kind);
  if (traits.id == local::EventField::kNameId) {
    auto n = name_of(*p.client, p.event->id);
    return n.empty() ? traits.unnamed : n;
  }
  switch (p.event->kind) {
    case EventKind::kInfeed: return xspace::kInfeedEventName;
    case EventKind::kOutfeed: return xspace::kOutfeedEventName;
    case EventKind::kAllReduce: return xspace::kAllReduceEventName;
    case EventKind::kSend: return xspace::kSendEventName;
    case EventKind::kRecvDone: return xspace::kRecvDoneEventName;
    case EventKind::kAllocation: return xspace::kMemoryAllocationEventName;
    case EventKind::kDeallocation: return xspace::kMemoryDeallocationEventName;
    case EventKind::kStep:
    case EventKind::kCompute:
    case EventKind::kFreeForm:
    case EventKind::kInputStage: break;  // named by their id, above
  }
  return "annotation";
}

std::optional<int64_t> step_at(const std::vector<StepSpan>& steps, int64_t t) {
  auto it =
      std::upper_bound(steps.begin(), steps.end(), t, [](int64_t v, const StepSpan& s) { return v < s.start_ns; });
  if (it == steps.begin()) return std::nullopt;
  --it;
  if (t > it->end_ns) return std::nullopt;
  return it->step_num;
}

std::string client_label(const LocalClientInfo& client) {
  return "local client pid " + std::to_string(client.pid) + " (" + client.program + ")";
}

// What went wrong with one client's data, as XSpace warnings.
void add_client_warnings(const LocalClientCapture& capture, tensorflow::profiler::XSpace& space) {
  const std::string who = client_label(capture.client);
  if (const uint64_t dropped = capture.events.dropped_events(); dropped > 0) {
    space.add_warnings(who + ": the capture memory budget (capture_memory_limit_mb) dropped " +
                       std::to_string(dropped) + " of its " + std::to_string(capture.events.received_events) +
                       " events, in " + std::to_string(capture.events.dropped_steps()) +
                       " whole steps and the time between them; its earliest and latest steps are kept");
  }
  if (capture.dropped_events > 0) {
    space.add_warnings(who + ": dropped " + std::to_string(capture.dropped_events) +
                       " events because its buffers were full");
  }
  if (!capture.complete) {
    space.add_warnings(who + " left or hung before the capture ended; its events may be incomplete");
  }
}

// The plane's metadata ids of the stats every event may carry, looked up once per plane rather than per stat.
struct StatIds {
  explicit StatIds(xspace::XPlaneBuilder& b)
      : step_num(b.stat_metadata_id(xspace::kStepNumStat)),
        bytes(b.stat_metadata_id(xspace::kBytesStat)),
        flops(b.stat_metadata_id(xspace::kFlopsStat)),
        all_reduce_id(b.stat_metadata_id(xspace::kAllReduceIdStat)),
        channel_id(b.stat_metadata_id(xspace::kChannelIdStat)),
        src_core(b.stat_metadata_id(xspace::kSrcCoreStat)),
        dst_core(b.stat_metadata_id(xspace::kDstCoreStat)) {}
  int64_t step_num, bytes, flops, all_reduce_id, channel_id, src_core, dst_core;
};

static_assert(std::size(xspace::kInputStageCategories) == local::kMaxInputStageCategory + 1u);

// An input stage's stats: its category by name, its id and its parent's, on the plane's Input Pipeline line.
void add_input_stage_stats(const HeldEvent& e, xspace::XStatsBuilder& stats) {
  const auto category = static_cast<size_t>(e.arg);
  if (category < std::size(xspace::kInputStageCategories))
    stats.add(xspace::kInputStageCategoryStat, xspace::kInputStageCategories[category]);
  stats.add(xspace::kInputStageIdStat, e.value);
  stats.add(xspace::kInputStageParentIdStat, e.value2);
}

bool is_memory_event(const HeldEvent& e) {
  return e.kind == EventKind::kAllocation || e.kind == EventKind::kDeallocation;
}

// One event of the plane being built: where its record is held, and its start. 16 bytes where a decoded event
// takes 48: a build holds its events as records, and one key per event of the plane it writes.
struct EventKey {
  int64_t start_ns;  // clients' clock, which orders events as the agent clock does (one offset for every client)
  uint32_t chunk;    // index into SortedEvents::chunks_
  uint32_t offset;
};
static_assert(sizeof(EventKey) == 16);

// The events of one plane (a core's, or one process's allocation records) in start order, read back from their
// records as they are written.
class SortedEvents {
 public:
  SortedEvents(const Clock& clock, const CustomPlaneOptions& options) : clock_(clock), options_(options) {}

  void reserve(size_t events) { keys_.reserve(events); }
  // Adds `capture`'s kept events inside the window for which `wanted(event)`, and its steps among them.
  template <typename Wanted>
  void add(const LocalClientCapture& capture, Wanted&& wanted) {
    const HeldClientEvents& held = capture.events;
    const auto first_chunk = static_cast<uint32_t>(chunks_.size());
    for (uint32_t i = 0; i < held.chunks.size(); ++i) chunks_.push_back({&capture, i});
    held.for_each([&](const HeldEvent& e, HeldRecord where) {
      if (!wanted(e)) return;
      const int64_t start = clock_.from_system_ns(e.start_ns);
      // Client values may be anything: an end past INT64_MAX is the end of time, not a wrapped negative.
      const int64_t end = xspace::saturating_add(start, e.duration_ns);
      if (end < options_.window_start_ns || start > options_.window_end_ns) return;
      keys_.push_back({e.start_ns, first_chunk + where.chunk, where.offset});
      if (e.kind == EventKind::kStep) steps_.push_back({{e.value, start, end}, name_of(held, e.id)});
    });
  }
  // By start; events that start together stay in the order they arrived in, client by client.
  void sort() {
    std::sort(keys_.begin(), keys_.end(), [](const EventKey& a, const EventKey& b) {
      return std::tie(a.start_ns, a.chunk, a.offset) < std::tie(b.start_ns, b.chunk, b.offset);
    });
    // Added in arrival order, client by client: in the keys' order once sorted by start, ties kept.
    std::stable_sort(steps_.begin(), steps_.end(),
                     [](const NamedStep& a, const NamedStep& b) { return a.span.start_ns < b.span.start_ns; });
  }
  bool empty() const { return keys_.empty(); }
  // The steps among the events, by start, with their names.
  struct NamedStep {
    StepSpan span;
    std::string_view name;
  };
  const std::vector<NamedStep>& steps() const { return steps_; }

  // Calls `f(PlacedEvent)` for every event, in order; the event lives for the call.
  template <typename F>
  void for_each(F&& f) const {
    for (const EventKey& key : keys_) {
      const auto& [capture, chunk] = chunks_[key.chunk];
      const HeldEvent e = capture->events.at({chunk, key.offset}, key.start_ns);
      f(PlacedEvent{&e, &capture->events, clock_.from_system_ns(key.start_ns)});
    }
  }

 private:
  const Clock& clock_;
  const CustomPlaneOptions& options_;
  std::vector<std::pair<const LocalClientCapture*, uint32_t>> chunks_;  // by a key's chunk: the client, its chunk
  std::vector<EventKey> keys_;
  std::vector<NamedStep> steps_;
};

// The steps among one core's events, by start.
std::vector<StepSpan> steps_of(const SortedEvents& events) {
  std::vector<StepSpan> steps;
  steps.reserve(events.steps().size());
  for (const SortedEvents::NamedStep& step : events.steps()) steps.push_back(step.span);
  return steps;
}

// Writes one core's events into its plane: steps on the Steps line, input stages on the Input Pipeline line, the
// rest one line per thread, each with its kind's stats and the step it ran in; lines and event metadata are made
// as the events need them.
class CorePlaneWriter {
 public:
  CorePlaneWriter(int32_t core, xspace::XPlaneBuilder& builder, std::vector<StepSpan> steps)
      : core_(core), builder_(builder), ids_(builder), steps_(std::move(steps)) {}

  void add(const PlacedEvent& p) {
    const HeldEvent& e = *p.event;
    if (e.kind == EventKind::kStep) {
      if (!steps_line_) steps_line_ = builder_.line_named(xspace::kStepsLineName);
      steps_line_->add_event(metadata_id(p), p.start_ns, e.duration_ns).add(ids_.step_num, e.value);
      return;
    }
    auto stats = line_of(p).add_event(metadata_id(p), p.start_ns, e.duration_ns);
    if (auto step = step_at(steps_, p.start_ns)) stats.add(ids_.step_num, *step);
    add_kind_stats(p, stats);
  }

 private:
  // Event metadata ids by (client, kind and name index): one hash lookup of the name per distinct op.
  int64_t metadata_id(const PlacedEvent& p) {
    const bool named = local::traits_of(p.event->kind).id == local::EventField::kNameId;
    auto key = std::make_tuple(p.client, p.event->kind, named ? p.event->id : 0u);
    auto it = metadata_ids_.find(key);
    if (it == metadata_ids_.end()) it = metadata_ids_.emplace(key, builder_.event_metadata_id(op_name(p))).first;
    return it->second;
  }

  xspace::XLineBuilder& line_of(const PlacedEvent& p) {
    if (p.event->kind == EventKind::kInputStage) {
      if (!input_pipeline_line_) input_pipeline_line_ = builder_.line_named(xspace::kInputPipelineLineName);
      return *input_pipeline_line_;
    }
    auto key = std::make_pair(p.client, p.event->stream);
    auto it = thread_lines_.find(key);
    if (it == thread_lines_.end()) {
      const int64_t tid = p.client->streams[p.event->stream].thread_id;
      it = thread_lines_.emplace(key, builder_.line(tid, "Thread " + std::to_string(tid))).first;
    }
    return it->second;
  }

  void add_kind_stats(const PlacedEvent& p, xspace::XStatsBuilder& stats) {
    const HeldEvent& e = *p.event;
    const int32_t core = core_;
    const StatIds& ids = ids_;
    switch (e.kind) {
      case EventKind::kInfeed:
      case EventKind::kOutfeed:
        if (e.value != 0) stats.add(ids.bytes, e.value);
        break;
      case EventKind::kCompute:
        if (e.value != 0) stats.add(ids.flops, e.value);
        if (e.value2 != 0) stats.add(ids.bytes, e.value2);
        break;
      case EventKind::kAllReduce: {
        stats.add(ids.all_reduce_id, static_cast<int64_t>(e.id));
        stats.add(ids.bytes, e.value);
        auto group = name_of(*p.client, static_cast<uint32_t>(e.arg));
        if (!group.empty()) stats.add(xspace::kReplicaGroupStat, group);
        break;
      }
      case EventKind::kSend:
        stats.add(ids.channel_id, static_cast<int64_t>(e.id));
        stats.add(ids.bytes, e.value);
        stats.add(ids.src_core, static_cast<int64_t>(core));
        stats.add(ids.dst_core, static_cast<int64_t>(e.arg));
        break;
      case EventKind::kRecvDone:
        stats.add(ids.channel_id, static_cast<int64_t>(e.id));
        stats.add(ids.bytes, e.value);
        stats.add(ids.src_core, static_cast<int64_t>(e.arg));
        stats.add(ids.dst_core, static_cast<int64_t>(core));
        break;
      case EventKind::kInputStage: add_input_stage_stats(e, stats); break;
      case EventKind::kStep:
      case EventKind::kFreeForm:
      case EventKind::kAllocation:  // on the host plane, see add_memory_events
      case EventKind::kDeallocation: break;
    }
  }

  const int32_t core_;
  xspace::XPlaneBuilder& builder_;
  const StatIds ids_;
  const std::vector<StepSpan> steps_;
  std::map<std::tuple<const HeldClientEvents*, EventKind, uint32_t>, int64_t> metadata_ids_;
  std::optional<xspace::XLineBuilder> steps_line_;
  std::optional<xspace::XLineBuilder> input_pipeline_line_;
  std::map<std::pair<const HeldClientEvents*, uint32_t>, xspace::XLineBuilder> thread_lines_;
};

// Events a streamed plane holds as objects before they go to the wire: a few hundred KiB.
constexpr size_t kStreamedBatchEvents = 2048;

// Moves a streamed plane's events to the wire every kStreamedBatchEvents events added; nothing without a stream.
class BatchFlusher {
 public:
  explicit BatchFlusher(xspace::XPlaneStreamWriter* stream) : stream_(stream) {}
  void added() {
    if (stream_ && ++added_ == kStreamedBatchEvents) {
      stream_->flush_events();
      added_ = 0;
    }
  }

 private:
  xspace::XPlaneStreamWriter* stream_;
  size_t added_ = 0;
};
// What a streamed plane reserves per event in the serialized XSpace; the space's other parts (host plane, host
// series, warnings) follow in what is left.
constexpr size_t kReservedBytesPerEvent = 160;

// XProf's overview and input pipeline tools ignore `/device:CUSTOM:` planes and read a host-only program's steps
// from /host:CPU: a root event (stat `_r` = 1) with a `step_num`, and the events nested in it on the same line,
// which its step grouping gives the step's group. So each core also gets a host line with, per step, a marker
// named as the step, and in it the union of the core's op time in the step (host compute for XProf) and the union
// of its input time (infeed and root input stages, marked with XProf's input stage stat: waiting for input). An
// event belongs to the step it starts in and is cut at the step's end. Our analysis takes steps from the Steps
// line, never from these markers, and gives the segments no type (they carry no group or correlation id).
struct StepSegment {
  size_t step;  // index into HostStepMarkers::steps
  int64_t start_ns, end_ns;
};

bool is_input_time(const HeldEvent& e) {
  return e.kind == EventKind::kInfeed || (e.kind == EventKind::kInputStage && e.value2 == 0);
}

// One core's host step markers: its steps that hold time, their names and the unions of their ops and input. Events
// come by start, so each step's segments follow those of the steps before it: one list of each, not one per step.
struct HostStepMarkers {
  int32_t core = 0;
  std::vector<StepSpan> steps;
  std::vector<std::string_view> names;
  std::vector<StepSegment> ops, input;  // by step, then start

  explicit HostStepMarkers(int32_t core, const SortedEvents& events) : core(core) {
    for (const SortedEvents::NamedStep& step : events.steps()) {
      if (step.span.end_ns <= step.span.start_ns) continue;  // an empty or negative step holds nothing
      steps.push_back(step.span);
      names.push_back(step.name);
    }
  }
  // An event, in start order: its time in the step it starts in joins that step's union.
  void add(const PlacedEvent& p) {
    if (steps.empty() || p.event->kind == EventKind::kStep || p.event->kind == EventKind::kFreeForm ||
        (p.event->kind == EventKind::kInputStage && !is_input_time(*p.event)))
      return;
    auto it = std::upper_bound(steps.begin(), steps.end(), p.start_ns,
                               [](int64_t t, const StepSpan& s) { return t < s.start_ns; });
    if (it == steps.begin() || p.start_ns >= std::prev(it)->end_ns) return;
    const StepSpan& step = *std::prev(it);
    const int64_t end = std::min(step.end_ns, xspace::saturating_add(p.start_ns, p.event->duration_ns));
    if (end <= p.start_ns) return;
    const auto index = static_cast<size_t>(std::distance(steps.begin(), std::prev(it)));
    std::vector<StepSegment>& segments = is_input_time(*p.event) ? input : ops;
    if (!segments.empty() && segments.back().step == index && p.start_ns <= segments.back().end_ns) {
      segments.back().end_ns = std::max(segments.back().end_ns, end);
    } else {
      segments.push_back({index, p.start_ns, end});
    }
  }
};

void add_host_step_markers(const HostStepMarkers& markers, tensorflow::profiler::XSpace& space, BatchFlusher& flusher) {
  if (markers.steps.empty()) return;
  xspace::XPlaneBuilder host(xspace::find_or_add_plane(space, xspace::kHostPlaneName));
  xspace::XLineBuilder line =
      host.line_named(std::string(xspace::kHostStepMarkersLinePrefix) + std::to_string(markers.core));
  const int64_t ops_id = host.event_metadata_id(xspace::kHostStepOpsEventName);
  const int64_t input_id = host.event_metadata_id(xspace::kHostStepInputEventName);
  size_t o = 0, n = 0;
  for (size_t i = 0; i < markers.steps.size(); ++i) {
    const std::string_view name = markers.names[i];
    const StepSpan& step = markers.steps[i];
    line.add_event(name.empty() ? std::string_view("train") : name, step.start_ns, step.end_ns - step.start_ns)
        .add(xspace::kStepNumStat, step.step_num)
        .add(xspace::kRootEventStat, int64_t{1});
    flusher.added();
    // The step's two unions merged by start: XProf nests the events of a line in their order.
    const auto& ops = markers.ops;
    const auto& input = markers.input;
    for (;;) {
      const bool op_next = o < ops.size() && ops[o].step == i;
      const bool input_next = n < input.size() && input[n].step == i;
      if (!op_next && !input_next) break;
      if (op_next && (!input_next || ops[o].start_ns <= input[n].start_ns)) {
        line.add_event(ops_id, ops[o].start_ns, ops[o].end_ns - ops[o].start_ns);
        ++o;
      } else {
        line.add_event(input_id, input[n].start_ns, input[n].end_ns - input[n].start_ns)
            .add(xspace::kInputPipelineStageNameStat, xspace::kHostStepInputEventName);
        ++n;
      }
      flusher.added();
    }
  }
}

// Adds one core's events to its plane, in one pass over them that also gathers its host step markers; with `stream`,
// moving them to the wire a batch at a time.
void add_core_events(int32_t core, const SortedEvents& events, xspace::XPlaneBuilder& builder,
                     xspace::XPlaneStreamWriter* stream, HostStepMarkers& markers) {
  CorePlaneWriter writer(core, builder, steps_of(events));
  BatchFlusher flusher(stream);
  events.for_each([&](const PlacedEvent& p) {
    writer.add(p);
    markers.add(p);
    flusher.added();
  });
}

// The allocator name each (process, tag) is shown under: the tag itself, or "<tag> (pid P)" where processes
// of this capture share a tag, since the memory profile keys allocators by name within a host.
std::map<std::pair<int32_t, std::string>, std::string> allocator_names(
    const std::vector<std::pair<const LocalClientCapture*, SortedEvents>>& memory) {
  std::map<std::string, std::set<int32_t>> pids_by_tag;
  for (const auto& [capture, events] : memory) {
    events.for_each([&, pid = capture->client.pid](const PlacedEvent& p) {
      pids_by_tag[std::string(name_of(*p.client, p.event->id))].insert(pid);
    });
  }
  std::map<std::pair<int32_t, std::string>, std::string> names;
  for (const auto& [tag, pids] : pids_by_tag)
    for (int32_t pid : pids) names[{pid, tag}] = pids.size() == 1 ? tag : tag + " (pid " + std::to_string(pid) + ")";
  return names;
}

// Writes one process's allocation records on its line of the host plane, each allocator replayed on its own;
// returns how many freed a block the capture did not see allocated.
uint64_t add_process_memory_events(const LocalClientCapture& capture, const SortedEvents& events,
                                   const std::map<std::pair<int32_t, std::string>, std::string>& names,
                                   xspace::XPlaneBuilder& host, BatchFlusher& flusher) {
  xspace::XLineBuilder line = host.line_named(std::string(xspace::kMemoryAllocationsLinePrefix) + " pid " +
                                              std::to_string(capture.client.pid) + " (" + capture.client.program + ")");
  std::map<uint32_t, xspace::AllocatorEvents> allocators;  // by the tag's name index
  events.for_each([&](const PlacedEvent& p) {
    const HeldEvent& e = *p.event;
    auto it = allocators.find(e.id);
    if (it == allocators.end()) {
      const std::string& name = names.at({capture.client.pid, std::string(name_of(*p.client, e.id))});
      it = allocators.try_emplace(e.id, name, host).first;
    }
    const auto address = static_cast<uint64_t>(e.value2);
    auto stats = e.kind == EventKind::kAllocation ? it->second.allocate(line, p.start_ns, address, e.value)
                                                  : it->second.free(line, p.start_ns, address);
    if (auto op = name_of(*p.client, static_cast<uint32_t>(e.arg)); !op.empty()) stats.add(xspace::kTfOpStat, op);
    flusher.added();
  });
  uint64_t unknown_frees = 0;
  for (const auto& [tag, allocator] : allocators) unknown_frees += allocator.unknown_frees();
  return unknown_frees;
}

// What a build writes where: per core, the clients with events there and how many (allocation records aside);
// per client with allocation records, how many.
struct BuildPlan {
  struct Core {
    std::vector<const LocalClientCapture*> clients;
    size_t events = 0;
  };
  std::map<int32_t, Core> cores;
  std::vector<std::pair<const LocalClientCapture*, size_t>> memory;
};

// Reads each client's records once, counting its events per stream, so that each plane's list is made once, at
// its size.
BuildPlan plan_of(const std::vector<LocalClientCapture>& captures) {
  BuildPlan plan;
  for (const auto& capture : captures) {
    const HeldClientEvents& held = capture.events;
    std::vector<size_t> stream_events(held.streams.size());
    size_t memory_events = 0;
    held.for_each([&](const HeldEvent& e, HeldRecord) {
      if (is_memory_event(e)) {
        ++memory_events;
      } else {
        ++stream_events[e.stream];
      }
    });
    std::map<int32_t, size_t> by_core;
    for (size_t i = 0; i < held.streams.size(); ++i)
      if (stream_events[i] > 0) by_core[held.streams[i].core] += stream_events[i];
    for (const auto& [core, n] : by_core) {
      plan.cores[core].clients.push_back(&capture);
      plan.cores[core].events += n;
    }
    if (memory_events > 0) plan.memory.emplace_back(&capture, memory_events);
  }
  return plan;
}

// Every process's allocation records, on the host plane where TensorFlow writes its allocators' events.
void add_memory_events(const BuildPlan& plan, const Clock& clock, const CustomPlaneOptions& options,
                       tensorflow::profiler::XSpace& space, BatchFlusher& flusher) {
  std::vector<std::pair<const LocalClientCapture*, SortedEvents>> memory;
  for (const auto& [capture, n] : plan.memory) {
    SortedEvents events(clock, options);
    events.reserve(n);
    events.add(*capture, is_memory_event);
    if (events.empty()) continue;
    events.sort();
    memory.emplace_back(capture, std::move(events));
  }
  if (memory.empty()) return;
  const auto names = allocator_names(memory);
  xspace::XPlaneBuilder host(xspace::find_or_add_plane(space, xspace::kHostPlaneName));
  for (auto& [capture, events] : memory) {
    if (const uint64_t unknown = add_process_memory_events(*capture, events, names, host, flusher); unknown > 0) {
      space.add_warnings(client_label(capture->client) + ": " + std::to_string(unknown) +
                         " frees of blocks allocated before the capture; its allocators' totals leave them out");
    }
  }
}

// One core's events, sorted: each client's records there, read once more.
SortedEvents events_on_core(int32_t core, const BuildPlan::Core& planned, const Clock& clock,
                            const CustomPlaneOptions& options) {
  SortedEvents events(clock, options);
  events.reserve(planned.events);
  for (const LocalClientCapture* capture : planned.clients) {
    const std::vector<EventStream>& streams = capture->events.streams;
    events.add(*capture, [&](const HeldEvent& e) { return !is_memory_event(e) && streams[e.stream].core == core; });
  }
  events.sort();
  return events;
}

// One core's plane as a thread of the build makes it: the plane (written to the wire a batch at a time when
// streamed) and its host step markers.
struct CoreBuild {
  CoreBuild(int32_t core, const BuildPlan::Core& planned) : core(core), planned(planned) {}
  CoreBuild(const CoreBuild&) = delete;  // its stream refers to its plane
  // Once in the space: what it held goes.
  void release() {
    stream.reset();
    markers.reset();
    tensorflow::profiler::XPlane().Swap(&plane);
  }
  int32_t core;
  const BuildPlan::Core& planned;
  std::optional<std::pair<const LocalClientCapture*, CoreDrops>> drops;  // what the budget dropped here
  tensorflow::profiler::XPlane plane;
  std::optional<xspace::XPlaneStreamWriter> stream;
  std::optional<HostStepMarkers> markers;
};

void build_core(CoreBuild& b, const Clock& clock, const CustomPlaneOptions& options) {
  const SortedEvents events = events_on_core(b.core, b.planned, clock, options);
  b.plane.set_name(std::string(xspace::kCustomPlanePrefix) + std::to_string(b.core));
  b.plane.set_id(b.core);
  if (options.serialized_planes) b.stream.emplace(b.plane);
  xspace::XPlaneBuilder builder(&b.plane);
  if (b.drops) {
    const auto& [owner, d] = *b.drops;
    builder.stats()
        .add(xspace::kClientPidStat, static_cast<int64_t>(owner->client.pid))
        .add(xspace::kDroppedEventsStat, static_cast<int64_t>(d.events))
        .add(xspace::kDroppedStepsStat, static_cast<int64_t>(d.steps));
  }
  b.markers.emplace(b.core, events);
  add_core_events(b.core, events, builder, b.stream ? &*b.stream : nullptr, *b.markers);
}

}  // namespace

void add_custom_planes(const std::vector<LocalClientCapture>& captures, const Clock& clock,
                       const CustomPlaneOptions& options, tensorflow::profiler::XSpace& space) {
  BuildPlan plan = plan_of(captures);
  // What the budget dropped, per core.
  std::map<int32_t, std::pair<const LocalClientCapture*, CoreDrops>> drops_by_core;
  for (const auto& capture : captures) {
    for (const auto& [core, d] : capture.events.drops) {
      auto& [owner, total] = drops_by_core[core];
      owner = &capture;
      total.events += d.events;
      total.steps += d.steps;
    }
    add_client_warnings(capture, space);
  }
  if (options.serialized_planes) {
    // Room for everything the planes can take (an event and its stats serialize to well under this): growing
    // the string would copy it whole, while room never written costs no memory.
    size_t core_events = 0;
    for (const auto& [core, planned] : plan.cores) core_events += planned.events;
    options.serialized_planes->reserve(options.serialized_planes->size() + core_events * kReservedBytesPerEvent);
  }

  for (auto& [core, d] : drops_by_core) plan.cores[core];  // a core that lost everything still has its plane
  std::deque<CoreBuild> builds;
  for (const auto& [core, planned] : plan.cores) {
    CoreBuild& b = builds.emplace_back(core, planned);
    if (auto it = drops_by_core.find(core); it != drops_by_core.end()) b.drops = {it->second.first, it->second.second};
  }
  BatchFlusher host_flusher(options.serialized_planes ? options.host_plane_stream : nullptr);
  // One core at a time: its events are decoded from their records as its plane is written.
  for (CoreBuild& b : builds) {
    build_core(b, clock, options);
    if (b.stream) {
      b.stream->finish(*options.serialized_planes);
    } else {
      *xspace::find_or_add_plane(space, b.plane.name(), b.core) = std::move(b.plane);
    }
    add_host_step_markers(*b.markers, space, host_flusher);
    b.release();
  }
  add_memory_events(plan, clock, options, space, host_flusher);
}

}  // namespace podscope::agent
