// Building /device:CUSTOM:<core> planes from client batches: names and stats as TF/XLA spell them,
// step_num on every event inside a step, the agent's clock offset applied, window clipping, warnings; input
// stages of every thread on the plane's Input Pipeline line with their category, id and parent id; allocation
// records on the host plane as TensorFlow's allocator events with each allocator's running totals; clients that share
// a core in its one plane, in start order, events that start together in the order they came.
#include "agent/local/custom_planes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::agent {
namespace {

using local::EventKind;
using xspace::XEventView;
using xspace::XPlaneReader;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;

// A client's batch as the capture window's store holds it.
HeldClientEvents held(const local::EventsMsg& batch) {
  CompactEventStore store(size_t{64} << 20, Retention::kEarliestAndLatest);
  store.add(1, batch);
  return store.take(1);
}

LocalClientCapture capture_for_core(int32_t core) {
  LocalClientCapture c;
  c.client.pid = 100 + core;
  c.client.program = "trainer";
  c.client.cores = {core};
  c.complete = true;
  local::EventsMsg b;
  b.core = core;
  b.thread_id = 55;
  b.names = {{1, "train"}, {7, "matmul"}, {8, "{0,1}"}, {9, "skewed"}};
  b.events = {
      {EventKind::kStep, 1, 0, kT0, 10'000, 4, 0},
      {EventKind::kInfeed, 0, 0, kT0 + 100, 1000, 512, 0},
      {EventKind::kCompute, 7, 0, kT0 + 1200, 3000, 2'000'000, 4096},
      {EventKind::kAllReduce, 4, 8, kT0 + 4300, 5000, 8192, 0},
      {EventKind::kSend, static_cast<uint32_t>(1 + core), 1 - core, kT0 + 4400, 2000, 4096, 0},
      {EventKind::kRecvDone, static_cast<uint32_t>(2 - core), 1 - core, kT0 + 4500, 2500, 4096, 0},
      {EventKind::kStep, 1, 0, kT0 + 10'000, 10'000, 5, 0},
      {EventKind::kOutfeed, 0, 0, kT0 + 19'000, 500, 16, 0},
      {EventKind::kCompute, 9, 0, kT0 + 15'000, -500, 0, 0},    // a negative duration: in no op segment
      {EventKind::kFreeForm, 99, 0, kT0 + 25'000, 100, 0, 0},   // outside every step
      {EventKind::kSend, 1, 1, kT0 - 1'000'000, 100, 4096, 0},  // before the window
  };
  c.events = held(b);
  return c;
}

TEST(CustomPlanes, OnePlanePerCoreWithXlaNamesAndStats) {
  tensorflow::profiler::XSpace space;
  const Clock clock(/*offset_ns=*/1000);
  add_custom_planes({capture_for_core(0), capture_for_core(1)}, clock, {kT0, kT0 + 1'000'000}, space);
  ASSERT_EQ(space.planes_size(), 3);  // the two cores, and the host plane with their step markers
  const auto* plane = xspace::find_plane(space, "/device:CUSTOM:1");
  ASSERT_NE(plane, nullptr);
  EXPECT_EQ(plane->id(), 1);
  XPlaneReader reader(*plane);

  const auto* steps = reader.find_line(xspace::kStepsLineName);
  ASSERT_NE(steps, nullptr);
  std::vector<int64_t> step_nums;
  reader.for_each_event(*steps, [&](const XEventView& e) {
    step_nums.push_back(*e.int_stat(xspace::kStepNumStat));
    EXPECT_EQ(e.name(), "train");
  });
  EXPECT_EQ(step_nums, (std::vector<int64_t>{4, 5}));

  const auto* ops = reader.find_line("Thread 55");
  ASSERT_NE(ops, nullptr);
  std::map<std::string, int> count;
  reader.for_each_event(*ops, [&](const XEventView& e) {
    const std::string name(e.name());
    ++count[name];
    if (name == "send") {
      EXPECT_EQ(e.start_ns(), kT0 + 4400 + 1000);  // the agent's clock offset applied
      EXPECT_EQ(e.int_stat(xspace::kChannelIdStat), 2);
      EXPECT_EQ(e.int_stat(xspace::kSrcCoreStat), 1);
      EXPECT_EQ(e.int_stat(xspace::kDstCoreStat), 0);
      EXPECT_EQ(e.int_stat(xspace::kBytesStat), 4096);
      EXPECT_EQ(e.int_stat(xspace::kStepNumStat), 4);
    } else if (name == "recv-done") {
      EXPECT_EQ(e.int_stat(xspace::kChannelIdStat), 1);
      EXPECT_EQ(e.int_stat(xspace::kSrcCoreStat), 0);
      EXPECT_EQ(e.int_stat(xspace::kDstCoreStat), 1);
    } else if (name == "all-reduce") {
      EXPECT_EQ(e.int_stat(xspace::kAllReduceIdStat), 4);
      EXPECT_EQ(e.str_stat(xspace::kReplicaGroupStat), "{0,1}");
      EXPECT_EQ(e.int_stat(xspace::kBytesStat), 8192);
    } else if (name == "matmul") {
      EXPECT_EQ(e.int_stat(xspace::kFlopsStat), 2'000'000);
      EXPECT_EQ(e.int_stat(xspace::kBytesStat), 4096);
      EXPECT_EQ(e.int_stat(xspace::kStepNumStat), 4);
    } else if (name == "outfeed") {
      EXPECT_EQ(e.int_stat(xspace::kStepNumStat), 5);
    } else if (name == "annotation") {
      EXPECT_FALSE(e.int_stat(xspace::kStepNumStat));  // outside every step: no step_num
    }
  });
  EXPECT_EQ(count["send"], 1);  // the one before the window is left out
  EXPECT_EQ(count["recv-done"], 1);
  EXPECT_EQ(count["infeed"], 1);
  EXPECT_EQ(count["outfeed"], 1);
  EXPECT_TRUE(space.warnings().empty());
}

TEST(CustomPlanes, ClientsSharingACoreShareItsPlaneInStartOrderAndEventsThatStartTogetherKeepTheirOrder) {
  auto client = [](int32_t pid, int64_t thread, std::vector<local::EventMsg> events) {
    LocalClientCapture c;
    c.client.pid = pid;
    c.client.program = "trainer";
    c.complete = true;
    local::EventsMsg b;
    b.core = 0;
    b.thread_id = thread;
    b.names = {{1, "train"}, {2, "a"}, {3, "b"}, {4, "c"}};
    b.events = std::move(events);
    c.events = held(b);
    return c;
  };
  const std::vector<LocalClientCapture> captures{
      client(100, 55,
             {{EventKind::kStep, 1, 0, kT0, 1000, 1, 0},
              {EventKind::kCompute, 4, 0, kT0 + 500, 10, 0, 0},  // three that start together, in this order
              {EventKind::kCompute, 2, 0, kT0 + 500, 10, 0, 0},
              {EventKind::kCompute, 3, 0, kT0 + 500, 10, 0, 0},
              {EventKind::kCompute, 2, 0, kT0 + 100, 10, 0, 0},
              {EventKind::kStep, 1, 0, kT0 + 2000, 1000, 3, 0}}),
      client(200, 66,
             {{EventKind::kStep, 1, 0, kT0 + 1000, 900, 2, 0}, {EventKind::kCompute, 3, 0, kT0 + 1100, 10, 0, 0}}),
  };
  tensorflow::profiler::XSpace space;
  add_custom_planes(captures, Clock(0), {kT0, kT0 + 1'000'000}, space);
  const auto* plane = xspace::find_plane(space, "/device:CUSTOM:0");
  ASSERT_NE(plane, nullptr);
  XPlaneReader reader(*plane);
  auto events_of = [&](std::string_view line_name) {
    std::vector<std::pair<std::string, int64_t>> events;  // name, step_num
    const auto* line = reader.find_line(line_name);
    EXPECT_NE(line, nullptr) << line_name;
    if (line) {
      reader.for_each_event(*line, [&](const XEventView& e) {
        events.emplace_back(std::string(e.name()), e.int_stat(xspace::kStepNumStat).value_or(-1));
      });
    }
    return events;
  };
  using Events = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(events_of(xspace::kStepsLineName), (Events{{"train", 1}, {"train", 2}, {"train", 3}}));
  EXPECT_EQ(events_of("Thread 55"), (Events{{"a", 1}, {"c", 1}, {"a", 1}, {"b", 1}}));
  EXPECT_EQ(events_of("Thread 66"), (Events{{"b", 2}})) << "the step of the core, whichever client sent it";
}

// XProf reads a host-only program's steps from root events on /host:CPU and the events nested in them.
TEST(CustomPlanes, EachCoresStepsAreAlsoHostRootEventsHoldingTheirOpAndInputTime) {
  tensorflow::profiler::XSpace space;
  add_custom_planes({capture_for_core(0), capture_for_core(1)}, Clock(0), {kT0, kT0 + 1'000'000}, space);
  const auto* host = xspace::find_plane(space, xspace::kHostPlaneName);
  ASSERT_NE(host, nullptr);
  XPlaneReader reader(*host);
  for (int core : {0, 1}) {
    const auto* line = reader.find_line(std::string(xspace::kHostStepMarkersLinePrefix) + std::to_string(core));
    ASSERT_NE(line, nullptr) << core;
    std::vector<std::tuple<std::string, int64_t, int64_t, std::optional<int64_t>>> events;
    reader.for_each_event(*line, [&](const XEventView& e) {
      EXPECT_EQ(e.int_stat(xspace::kRootEventStat).has_value(), e.name() == "train");
      if (e.name() == xspace::kHostStepInputEventName) {
        EXPECT_EQ(e.str_stat(xspace::kInputPipelineStageNameStat), xspace::kHostStepInputEventName);
      }
      events.emplace_back(std::string(e.name()), e.start_ns() - kT0, e.end_ns() - kT0,
                          e.int_stat(xspace::kStepNumStat));
    });
    // In start order, each step's marker first: step 4's infeed is input; matmul is one op segment, the all-reduce
    // and the channel ops overlapping it another; step 5's outfeed is op time; the free-form event is neither.
    using E = decltype(events)::value_type;
    EXPECT_EQ(events, (std::vector<E>{{"train", 0, 10'000, 4},
                                      {"annotated input", 100, 1100, std::nullopt},
                                      {"annotated ops", 1200, 4200, std::nullopt},
                                      {"annotated ops", 4300, 9300, std::nullopt},
                                      {"train", 10'000, 20'000, 5},
                                      {"annotated ops", 19'000, 19'500, std::nullopt}}));
  }
}

TEST(CustomPlanes, InputStagesOfEveryThreadGoToTheInputPipelineLineWithTheirTree) {
  LocalClientCapture c = capture_for_core(2);
  CompactEventStore store(size_t{64} << 20, Retention::kEarliestAndLatest);
  local::EventsMsg steps;
  steps.core = 2;
  steps.thread_id = 55;
  steps.names = {{1, "train"}};
  steps.events = {{EventKind::kStep, 1, 0, kT0, 10'000, 4, 0}};
  store.add(1, steps);
  local::InputStagesMsg loader;  // a loader thread's stages: a batch with a read, a preprocess and an enqueue
  loader.core = 2;
  loader.thread_id = 77;
  loader.names = {{3, "batch"}, {4, "read_shard"}, {5, "decode"}, {6, "to_device"}};
  loader.stages = {{3, local::InputStageCategory::kPreprocess, 100, 0, kT0 + 1000, 6000},
                   {4, local::InputStageCategory::kRead, 101, 100, kT0 + 1100, 3000},
                   {5, local::InputStageCategory::kPreprocess, 102, 100, kT0 + 4200, 1500},
                   {6, local::InputStageCategory::kEnqueue, 103, 100, kT0 + 5800, 100}};
  store.add(1, loader);
  local::InputStagesMsg worker;  // a worker thread reads for the same batch, outside every step
  worker.core = 2;
  worker.thread_id = 78;
  worker.names = {{9, "read_shard"}};
  worker.stages = {{9, local::InputStageCategory::kRead, 200, 100, kT0 + 20'000, 500}};
  store.add(1, worker);
  c.events = store.take(1);

  tensorflow::profiler::XSpace space;
  add_custom_planes({c}, Clock(/*offset_ns=*/1000), {kT0, kT0 + 1'000'000}, space);
  const auto* plane = xspace::find_plane(space, "/device:CUSTOM:2");
  ASSERT_NE(plane, nullptr);
  XPlaneReader reader(*plane);
  const auto* line = reader.find_line(xspace::kInputPipelineLineName);
  ASSERT_NE(line, nullptr);
  struct Stage {
    std::string name, category;
    int64_t id, parent, start_ns, duration_ns;
    std::optional<int64_t> step;
  };
  std::vector<Stage> stages;
  reader.for_each_event(*line, [&](const XEventView& e) {
    stages.push_back({std::string(e.name()), std::string(e.str_stat(xspace::kInputStageCategoryStat).value_or("")),
                      e.int_stat(xspace::kInputStageIdStat).value_or(-1),
                      e.int_stat(xspace::kInputStageParentIdStat).value_or(-1), e.start_ns(), e.duration_ns(),
                      e.int_stat(xspace::kStepNumStat)});
  });
  ASSERT_EQ(stages.size(), 5u);
  std::sort(stages.begin(), stages.end(), [](const Stage& a, const Stage& b) { return a.id < b.id; });
  const std::vector<std::tuple<std::string, std::string, int64_t, int64_t>> expected = {
      {"batch", "preprocess", 100, 0},
      {"read_shard", "read", 101, 100},
      {"decode", "preprocess", 102, 100},
      {"to_device", "enqueue", 103, 100},
      {"read_shard", "read", 200, 100}};
  for (size_t i = 0; i < stages.size(); ++i) {
    EXPECT_EQ(std::make_tuple(stages[i].name, stages[i].category, stages[i].id, stages[i].parent), expected[i]) << i;
  }
  EXPECT_EQ(stages[0].start_ns, kT0 + 1000 + 1000);  // the agent's clock offset applied
  EXPECT_EQ(stages[0].duration_ns, 6000);
  EXPECT_EQ(stages[1].step, 4);
  EXPECT_FALSE(stages[4].step);  // outside every step: no step_num
  // The stages are on no thread line.
  for (const auto& l : plane->lines()) {
    if (l.name() == xspace::kInputPipelineLineName) continue;
    reader.for_each_event(l, [&](const XEventView& e) { EXPECT_NE(e.name(), "read_shard") << l.name(); });
  }
}

// A process's allocation records as the store holds them.
LocalClientCapture allocating_client(int32_t pid, const std::vector<local::AllocationMsg>& allocations) {
  LocalClientCapture c;
  c.client.pid = pid;
  c.client.program = "trainer";
  c.client.cores = {0};
  c.complete = true;
  local::AllocationsMsg batch{1, 0, pid, {{3, "GPU_0_bfc"}, {4, "host_pinned"}, {5, "matmul"}}, allocations};
  CompactEventStore store(size_t{64} << 20, Retention::kEarliestAndLatest);
  store.add(1, batch);
  c.events = store.take(1);
  return c;
}

struct AllocatorEvent {
  std::string line, name, allocator, op;
  int64_t time_ns, address, bytes, live, peak;
  auto key() const { return std::tie(line, name, allocator, op, time_ns, address, bytes, live, peak); }
  bool operator==(const AllocatorEvent& o) const { return key() == o.key(); }
};

std::vector<AllocatorEvent> allocator_events(const tensorflow::profiler::XSpace& space) {
  std::vector<AllocatorEvent> out;
  const auto* host = xspace::find_plane(space, xspace::kHostPlaneName);
  if (!host) return out;
  XPlaneReader reader(*host);
  for (const auto& line : host->lines()) {
    reader.for_each_event(line, [&](const XEventView& e) {
      EXPECT_EQ(e.int_stat(xspace::kBytesReservedStat), 0);
      EXPECT_EQ(e.int_stat(xspace::kRequestedBytesStat), e.int_stat(xspace::kAllocationBytesStat));
      out.push_back(
          {line.name(), std::string(e.name()), std::string(e.str_stat(xspace::kAllocatorNameStat).value_or("")),
           std::string(e.str_stat(xspace::kTfOpStat).value_or("")), e.start_ns(),
           e.int_stat(xspace::kAddressStat).value_or(-1), e.int_stat(xspace::kAllocationBytesStat).value_or(-1),
           e.int_stat(xspace::kBytesAllocatedStat).value_or(-1), e.int_stat(xspace::kPeakBytesInUseStat).value_or(-1)});
    });
  }
  std::sort(out.begin(), out.end(), [](const AllocatorEvent& a, const AllocatorEvent& b) {
    return std::tie(a.line, a.time_ns) < std::tie(b.line, b.time_ns);
  });
  return out;
}

TEST(CustomPlanes, AllocationRecordsBecomeAllocatorEventsWithRunningTotalsPerAllocator) {
  using local::AllocationOp;
  // Out of time order, as several threads' batches arrive; a free of a block allocated before the capture.
  const LocalClientCapture c = allocating_client(
      7, {{AllocationOp::kAllocate, 3, 5, 0x2000, 300, kT0 + 20},
          {AllocationOp::kAllocate, 3, 0, 0x1000, 100, kT0 + 10},
          {AllocationOp::kFree, 3, 0, 0x9000, 0, kT0 + 5},
          {AllocationOp::kAllocate, 4, 0, 0x1000, 64, kT0 + 25},  // the same address in another allocator
          {AllocationOp::kFree, 3, 0, 0x1000, 0, kT0 + 30},
          {AllocationOp::kAllocate, 3, 0, 0x3000, 50, kT0 + 40},
          {AllocationOp::kAllocate, 3, 0, 0x4000, 1, kT0 + 2'000'000}});  // after the window
  tensorflow::profiler::XSpace space;
  add_custom_planes({c}, Clock(/*offset_ns=*/1000), CustomPlaneOptions{kT0, kT0 + 1'000'000}, space);
  const std::string line = "Memory Allocations pid 7 (trainer)";
  const std::vector<AllocatorEvent> expected = {
      {line, "MemoryDeallocation", "GPU_0_bfc", "", kT0 + 1005, 0x9000, 0, 0, 0},
      {line, "MemoryAllocation", "GPU_0_bfc", "", kT0 + 1010, 0x1000, 100, 100, 100},
      {line, "MemoryAllocation", "GPU_0_bfc", "matmul", kT0 + 1020, 0x2000, 300, 400, 400},
      {line, "MemoryAllocation", "host_pinned", "", kT0 + 1025, 0x1000, 64, 64, 64},
      {line, "MemoryDeallocation", "GPU_0_bfc", "", kT0 + 1030, 0x1000, 100, 300, 400},
      {line, "MemoryAllocation", "GPU_0_bfc", "", kT0 + 1040, 0x3000, 50, 350, 400},
  };
  EXPECT_EQ(allocator_events(space), expected);
  EXPECT_EQ(xspace::find_plane(space, "/device:CUSTOM:0"), nullptr) << "allocation records make no core plane";
  ASSERT_EQ(space.warnings_size(), 1);
  EXPECT_EQ(space.warnings(0),
            "local client pid 7 (trainer): 1 frees of blocks allocated before the capture; its "
            "allocators' totals leave them out");
}

TEST(CustomPlanes, ProcessesSharingAnAllocatorNameAreToldApartByPid) {
  using local::AllocationOp;
  const LocalClientCapture a = allocating_client(7, {{AllocationOp::kAllocate, 3, 0, 0x1000, 100, kT0 + 10},
                                                     {AllocationOp::kAllocate, 4, 0, 0x1000, 8, kT0 + 11}});
  const LocalClientCapture b = allocating_client(8, {{AllocationOp::kAllocate, 3, 0, 0x1000, 200, kT0 + 20}});
  tensorflow::profiler::XSpace space;
  add_custom_planes({a, b}, Clock(0), CustomPlaneOptions{kT0, kT0 + 1'000'000}, space);
  std::vector<std::string> allocators;
  for (const auto& e : allocator_events(space)) allocators.push_back(e.allocator);
  EXPECT_EQ(allocators, (std::vector<std::string>{"GPU_0_bfc (pid 7)", "host_pinned", "GPU_0_bfc (pid 8)"}));
}

TEST(CustomPlanes, DroppedEventsAndIncompleteClientsBecomeWarnings) {
  tensorflow::profiler::XSpace space;
  LocalClientCapture c = capture_for_core(3);
  c.dropped_events = 12;
  c.complete = false;
  add_custom_planes({c}, Clock(), {kT0, kT0 + 1'000'000}, space);
  ASSERT_EQ(space.warnings_size(), 2);
  EXPECT_NE(space.warnings(0).find("dropped 12 events"), std::string::npos);
  EXPECT_NE(space.warnings(1).find("pid 103"), std::string::npos);
}

TEST(CustomPlanes, ExtremeClientTimesAreClampedNotWrapped) {
  LocalClientCapture c = capture_for_core(0);
  local::EventsMsg b;
  b.events = {
      {EventKind::kFreeForm, 99, 0, kT0 + 10, INT64_MAX, 0, 0},   // ends past the end of time: in the window
      {EventKind::kFreeForm, 99, 0, INT64_MAX, INT64_MAX, 0, 0},  // starts after the window
      {EventKind::kFreeForm, 99, 0, INT64_MIN, 5, 0, 0},          // ends long before it
  };
  b.names = {{99, "odd"}};
  c.events = held(b);
  tensorflow::profiler::XSpace space;
  add_custom_planes({c}, Clock(/*offset_ns=*/1'000), {kT0, kT0 + 1'000'000}, space);
  int events = 0;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      for (const auto& e : line.events()) {
        ++events;
        EXPECT_GE(e.duration_ps(), 0);
      }
    }
  }
  EXPECT_EQ(events, 1) << "only the event that overlaps the window";
}

TEST(CustomPlanes, StreamedPlanesAreTheWholeBuildsPlanes) {
  // Two cores of many steps, more than a streamed batch each, one of them with events the budget dropped.
  auto client = [](int32_t core) {
    LocalClientCapture c;
    c.client.pid = 100 + core;
    c.client.program = "trainer";
    c.complete = true;
    local::EventsMsg b;
    b.core = core;
    b.thread_id = 55;
    b.names = {{1, "train"}, {7, "matmul"}, {8, "input"}};
    for (int64_t step = 0; step < 1500; ++step) {
      const int64_t t = kT0 + step * 10'000;
      b.events.push_back({EventKind::kStep, 1, 0, t, 9'000, step, 0});
      b.events.push_back({EventKind::kInfeed, 0, 0, t + 100, 1000, 512, 0});
      b.events.push_back({EventKind::kCompute, 7, 0, t + 1200, 3000, 2'000'000, 4096});
      b.events.push_back({EventKind::kAllReduce, 4, 8, t + 4300, 2000, 8192, 0});
    }
    c.events = held(b);
    if (core == 1) c.events.drops[core] = CoreDrops{12, 3};
    return c;
  };
  const std::vector<LocalClientCapture> captures{client(0), client(1)};
  const CustomPlaneOptions window{kT0, kT0 + 20'000'000};
  tensorflow::profiler::XSpace whole;
  add_custom_planes(captures, Clock(1000), window, whole);

  std::string bytes;
  tensorflow::profiler::XSpace rest;
  xspace::XPlaneStreamWriter host(*xspace::find_or_add_plane(rest, xspace::kHostPlaneName));
  CustomPlaneOptions streaming = window;
  streaming.serialized_planes = &bytes;
  streaming.host_plane_stream = &host;
  add_custom_planes(captures, Clock(1000), streaming, rest);
  ASSERT_EQ(rest.planes_size(), 1) << "the core planes went to the wire";
  EXPECT_EQ(rest.planes(0).lines(0).events_size(), 0) << "and so did the host plane's step markers";
  host.finish(bytes);
  rest.mutable_planes()->Clear();
  rest.AppendToString(&bytes);
  tensorflow::profiler::XSpace streamed;
  ASSERT_TRUE(streamed.ParseFromString(bytes));
  ASSERT_EQ(streamed.planes_size(), whole.planes_size());
  for (const auto& plane : whole.planes()) {
    const auto* same = xspace::find_plane(streamed, plane.name());
    ASSERT_NE(same, nullptr) << plane.name();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*same, plane)) << plane.name();
  }
  EXPECT_EQ(streamed.warnings_size(), whole.warnings_size());
}

}  // namespace
}  // namespace podscope::agent
