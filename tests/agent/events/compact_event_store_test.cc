// The compact event store on in-memory batches: what goes in comes out exactly; records stay small; when the
// budget is full a capture keeps each client's earliest and latest steps whole and counts what it dropped;
// a flooding client loses its own events before a modest one loses any; the flight recorder keeps the latest;
// input stages are held, charged and dropped with the steps they fall in, like every other event; a recorder is
// charged only the bytes it holds, at most 48 per event of every kind.
#include "agent/events/compact_event_store.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "tests/agent/events/decoded_events.h"

namespace podscope::agent {
namespace {

using local::EventKind;
using local::EventMsg;
using local::EventsMsg;
using testing::decoded;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;
constexpr size_t kMiB = size_t{1} << 20;

// Steps [first, first + count) of one thread on `core`, each a step event and `ops_per_step` compute events
// inside it, 1 ms apart.
EventsMsg steps(int32_t core, int64_t first, int64_t count, int ops_per_step) {
  EventsMsg b;
  b.core = core;
  b.thread_id = 10 + core;
  b.names = {{1, "train"}, {2, "matmul"}};
  for (int64_t s = first; s < first + count; ++s) {
    const int64_t t = kT0 + s * 1'000'000;
    b.events.push_back({EventKind::kStep, 1, 0, t, 900'000, s, 0});
    for (int i = 0; i < ops_per_step; ++i)
      b.events.push_back({EventKind::kCompute, 2, 0, t + 1000 * (i + 1), 500, 1 << 20, 4096});
  }
  return b;
}

// step_num → events of that step (its step event included) among the held ones.
std::map<int64_t, int> events_per_step(const HeldClientEvents& held) {
  const std::vector<HeldEvent> events = decoded(held);
  EXPECT_EQ(events.size(), held.kept_events) << "the kept events are the ones not left out";
  std::map<int64_t, std::pair<int64_t, int64_t>> spans;
  for (const HeldEvent& e : events)
    if (e.kind == EventKind::kStep) spans[e.value] = {e.start_ns, e.start_ns + e.duration_ns};
  std::map<int64_t, int> out;
  for (const HeldEvent& e : events) {
    for (const auto& [step, span] : spans) {
      if (e.start_ns >= span.first && e.start_ns <= span.second) ++out[step];
    }
  }
  return out;
}

TEST(CompactEventStore, EveryFieldRoundTripsExactlyIncludingExtremes) {
  CompactEventStore store(64 * kMiB, Retention::kEarliestAndLatest);
  EventsMsg b;
  b.core = 3;
  b.thread_id = std::numeric_limits<int64_t>::min();
  b.names = {{7, "all-reduce group {0,1}"}, {9, "matmul"}};
  b.events = {
      {EventKind::kAllReduce, 123456, 7, kT0, 5000, 8192, -1},
      {EventKind::kCompute, 9, 0, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
       std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()},
      {EventKind::kSend, 0xffffffffu, -5, std::numeric_limits<int64_t>::max(), -1, 0, 0},
      {EventKind::kFreeForm, 42, 0, 0, 0, 0, 0},  // a name id the batch does not define
  };
  store.add(5, b);
  const HeldClientEvents held = store.take(5);
  const std::vector<HeldEvent> events = decoded(held);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(held.kept_events, 4u);
  ASSERT_EQ(held.streams.size(), 1u);
  EXPECT_EQ(held.streams[0].core, 3);
  EXPECT_EQ(held.streams[0].thread_id, std::numeric_limits<int64_t>::min());

  const HeldEvent& ar = events[0];
  EXPECT_EQ(ar.kind, EventKind::kAllReduce);
  EXPECT_EQ(ar.id, 123456u);  // an all-reduce id is the client's own
  EXPECT_EQ(held.names[static_cast<size_t>(ar.arg)], "all-reduce group {0,1}");
  EXPECT_EQ(ar.start_ns, kT0);
  EXPECT_EQ(ar.value, 8192);
  EXPECT_EQ(ar.value2, -1);

  const HeldEvent& mm = events[1];
  EXPECT_EQ(held.names[mm.id], "matmul");
  EXPECT_EQ(mm.start_ns, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(mm.duration_ns, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(mm.value, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(mm.value2, std::numeric_limits<int64_t>::max());

  const HeldEvent& send = events[2];
  EXPECT_EQ(send.id, 0xffffffffu);
  EXPECT_EQ(send.arg, -5);
  EXPECT_EQ(send.start_ns, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(send.duration_ns, -1);

  EXPECT_EQ(events[3].id, 0u) << "an undefined name is no name, not another's";
  EXPECT_EQ(held.dropped_events(), 0u);
  EXPECT_EQ(store.charged_bytes(), 0u) << "take() gives the budget back";
}

TEST(CompactEventStore, ARecordReadAloneIsTheEventAtItsPlaceGivenItsStart) {
  CompactEventStore store(64 * kMiB, Retention::kEarliestAndLatest);
  for (int64_t s = 0; s < 3000; s += 100) store.add(1, steps(s % 200 == 0 ? 0 : 1, s, 100, 9));
  const HeldClientEvents held = store.take(1);
  ASSERT_GT(held.chunks.size(), 1u) << "records in more than one chunk";
  uint64_t read = 0;
  held.for_each([&](const HeldEvent& e, HeldRecord where) {
    const HeldEvent alone = held.at(where, e.start_ns);
    EXPECT_EQ(alone.kind, e.kind);
    EXPECT_EQ(alone.stream, e.stream);
    EXPECT_EQ(alone.start_ns, e.start_ns);
    EXPECT_EQ(alone.duration_ns, e.duration_ns);
    EXPECT_EQ(alone.id, e.id);
    EXPECT_EQ(alone.value, e.value);
    EXPECT_EQ(alone.value2, e.value2);
    ++read;
  });
  EXPECT_EQ(read, 30'000u);
  EXPECT_EQ(held.kept_events, 30'000u);
}

// One root input stage and a read stage nested in it inside every step of steps(core, first, count, ...).
local::InputStagesMsg input_stages(int32_t core, int64_t first, int64_t count) {
  local::InputStagesMsg b;
  b.core = core;
  b.thread_id = 20 + core;
  b.names = {{3, "input_batch"}, {4, "read_batch"}};
  for (int64_t s = first; s < first + count; ++s) {
    const int64_t t = kT0 + s * 1'000'000 + 100'000;
    const uint64_t root = (uint64_t{1} << 40) | static_cast<uint64_t>(2 * s + 1);
    b.stages.push_back({3, local::InputStageCategory::kPreprocess, root, 0, t, 50'000});
    b.stages.push_back({4, local::InputStageCategory::kRead, root + 1, root, t + 1000, 40'000});
  }
  return b;
}

TEST(CompactEventStore, InputStagesRoundTripAsEventsWithNamesCategoriesAndIds) {
  CompactEventStore store(64 * kMiB, Retention::kEarliestAndLatest);
  local::InputStagesMsg b = input_stages(2, 0, 1);
  b.stages.push_back({4, local::InputStageCategory::kEnqueue, ~uint64_t{0} >> 1, ~uint64_t{0} >> 2, kT0, 0});
  store.add(1, b);
  const HeldClientEvents held = store.take(1);
  const std::vector<HeldEvent> events = decoded(held);
  ASSERT_EQ(events.size(), 3u);
  for (size_t i = 0; i < events.size(); ++i) {
    const HeldEvent& e = events[i];
    const local::InputStageMsg& sent = b.stages[i];
    EXPECT_EQ(e.kind, EventKind::kInputStage) << i;
    EXPECT_EQ(held.names[e.id], sent.name_id == 3 ? "input_batch" : "read_batch") << i;
    EXPECT_EQ(e.arg, static_cast<int32_t>(sent.category)) << i;
    EXPECT_EQ(static_cast<uint64_t>(e.value), sent.stage_id) << i;
    EXPECT_EQ(static_cast<uint64_t>(e.value2), sent.parent_id) << i;
    EXPECT_EQ(e.start_ns, sent.start_ns) << i;
    EXPECT_EQ(e.duration_ns, sent.duration_ns) << i;
    EXPECT_EQ(held.streams[e.stream].core, 2) << i;
    EXPECT_EQ(held.streams[e.stream].thread_id, 22) << i;
  }
}

TEST(CompactEventStore, InputStagesAreChargedAndDroppedWithTheirWholeSteps) {
  // 2,000 steps of 10 events and 2 input stages from another thread; the budget holds a few hundred steps.
  CompactEventStore store(2 * kMiB, Retention::kEarliestAndLatest);
  size_t charged_before_stages = 0;
  for (int64_t first = 0; first < 2000; first += 50) {
    store.add(1, steps(0, first, 50, 9));
    if (first == 0) charged_before_stages = store.charged_bytes();
    store.add(1, input_stages(0, first, 50));
    if (first == 0) {
      EXPECT_GE(store.charged_bytes() - charged_before_stages, 100 * CaptureCost::of({}));
    }
  }
  const HeldClientEvents held = store.take(1);
  EXPECT_EQ(held.received_events, 24'000u);
  EXPECT_EQ(held.kept_events + held.dropped_events(), held.received_events) << "every event kept or counted";
  ASSERT_GT(held.dropped_steps(), 0u);
  const auto per_step = events_per_step(held);
  for (const auto& [step, n] : per_step) EXPECT_EQ(n, 12) << "step " << step << " is whole, its stages included";
  EXPECT_EQ(per_step.size() + held.dropped_steps(), 2000u);
}

TEST(CompactEventStore, TypicalEventsTakeFarLessThanFortyEightBytesEach) {
  CompactEventStore store(1024 * kMiB, Retention::kEarliestAndLatest);
  for (int64_t first = 0; first < 20'000; first += 1000) store.add(1, steps(0, first, 1000, 9));
  ASSERT_EQ(store.held_events(), 200'000u);
  const double record = static_cast<double>(store.record_bytes()) / 200'000;
  EXPECT_LE(record, 16.0) << "bytes per record";
}

TEST(CompactEventStore, AFullBudgetKeepsTheEarliestAndLatestStepsWholeAndCountsTheRest) {
  // 2,000 steps of 10 events; the budget holds a few hundred steps.
  CompactEventStore store(2 * kMiB, Retention::kEarliestAndLatest);
  for (int64_t first = 0; first < 2000; first += 50) store.add(1, steps(0, first, 50, 9));
  const HeldClientEvents held = store.take(1);

  EXPECT_EQ(held.received_events, 20'000u);
  EXPECT_EQ(held.kept_events + held.dropped_events(), held.received_events) << "every event kept or counted";
  ASSERT_GT(held.dropped_steps(), 0u);
  const auto per_step = events_per_step(held);
  ASSERT_FALSE(per_step.empty());
  for (const auto& [step, n] : per_step) EXPECT_EQ(n, 10) << "step " << step << " is whole";
  EXPECT_EQ(per_step.size() + held.dropped_steps(), 2000u);
  EXPECT_EQ(per_step.begin()->first, 0) << "the earliest step is kept";
  EXPECT_EQ(per_step.rbegin()->first, 1999) << "the latest step is kept";
  // One gap: a prefix and a suffix of the steps.
  int64_t gaps = 0, prev = -1;
  for (const auto& [step, n] : per_step) {
    if (prev >= 0 && step != prev + 1) ++gaps;
    prev = step;
  }
  EXPECT_EQ(gaps, 1);
  EXPECT_EQ(held.drops.at(0).steps, held.dropped_steps());
}

TEST(CompactEventStore, AFloodingClientLosesItsOwnEventsBeforeAModestOneLosesAny) {
  CompactEventStore store(4 * kMiB, Retention::kEarliestAndLatest);
  store.add(2, steps(1, 0, 100, 4));  // modest: 500 events
  for (int64_t first = 0; first < 20'000; first += 100) {
    store.add(1, steps(0, first, 100, 9));  // a flood: 200,000 events
    if (first == 10'000) store.add(2, steps(1, 100, 100, 4));
  }
  EXPECT_LE(store.peak_charged_bytes(), store.budget_bytes());
  const HeldClientEvents modest = store.take(2);
  const HeldClientEvents flood = store.take(1);
  EXPECT_EQ(modest.dropped_events(), 0u);
  EXPECT_EQ(modest.kept_events, 1000u);
  EXPECT_GT(flood.dropped_events(), 150'000u);
  EXPECT_EQ(flood.kept_events + flood.dropped_events(), 200'000u);
}

TEST(CompactEventStore, TheFlightRecorderKeepsTheLatestSteps) {
  CompactEventStore store(kMiB / 8, Retention::kLatest);
  for (int64_t first = 0; first < 2000; first += 50) store.add(1, steps(0, first, 50, 9));
  const HeldClientEvents held = store.take(1);
  const auto per_step = events_per_step(held);
  ASSERT_FALSE(per_step.empty());
  EXPECT_EQ(per_step.rbegin()->first, 1999);
  EXPECT_GT(per_step.begin()->first, 0);
  for (const auto& [step, n] : per_step) EXPECT_EQ(n, 10) << "step " << step << " is whole";
  EXPECT_EQ(per_step.size() + held.dropped_steps(), 2000u);
}

TEST(CompactEventStore, ACopyOfASpanLeavesEverythingHeldAndDropsOnlyIncompleteSteps) {
  CompactEventStore store(kMiB / 8, Retention::kLatest);
  for (int64_t s = 0; s < 3000; s += 100) store.add(1, steps(0, s, 100, 9));
  const uint64_t held = store.held_events();
  ASSERT_GT(store.lost_events(), 0u);
  const std::vector<HeldSpan> spans = store.held_spans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_GE(spans[0].whole_since_ns, spans[0].oldest_start_ns);
  // Steps 2900..2949: whole, and still held afterwards.
  const HeldClientEvents copy =
      store.copy(1, kT0 + int64_t{2900} * 1'000'000, kT0 + int64_t{2949} * 1'000'000 + 900'000);
  const auto per_step = events_per_step(copy);
  ASSERT_EQ(per_step.size(), 50u);
  for (const auto& [step, n] : per_step) EXPECT_EQ(n, 10) << "step " << step;
  EXPECT_EQ(store.held_events(), held);
  // A span reaching back past what was lost keeps only whole steps after it.
  const HeldClientEvents all = store.copy(1, kT0, kT0 + int64_t{3000} * 1'000'000);
  for (const auto& [step, n] : events_per_step(all)) EXPECT_EQ(n, 10) << "step " << step;
  EXPECT_GT(all.dropped_events() + store.lost_events(), 0u);
  EXPECT_GT(all.lost_until_ns, kT0) << "the copy says until when events were lost";
  EXPECT_LE(all.lost_until_ns, spans[0].whole_since_ns);
  for (const HeldEvent& e : decoded(all)) EXPECT_GE(e.start_ns, all.lost_until_ns);
}

// Allocation records of one allocator thread: an allocation and its free per op, addresses of a real heap.
local::AllocationsMsg allocations(int64_t first, int64_t count) {
  local::AllocationsMsg b;
  b.core = 0;
  b.thread_id = 30;
  b.names = {{5, "gpu_bfc"}, {6, "matmul"}};
  for (int64_t s = first; s < first + count; ++s) {
    const int64_t t = kT0 + s * 1'000'000 + 200'000;
    const uint64_t address = 0x7f3a'2000'0000 + static_cast<uint64_t>(s % 64) * 65536;
    b.allocations.push_back({local::AllocationOp::kAllocate, 5, 6, address, 65536, t});
    b.allocations.push_back({local::AllocationOp::kFree, 5, 6, address, 0, t + 50'000});
  }
  return b;
}

TEST(CompactEventStore, ARecorderIsChargedWhatItHoldsAtMostFortyEightBytesAnEventOfEveryKind) {
  struct Kind {
    const char* name;
    std::function<void(CompactEventStore&, int64_t first, int64_t count)> add;
  };
  const std::vector<Kind> kinds = {
      {"steps and computes", [](CompactEventStore& s, int64_t f, int64_t n) { s.add(1, steps(0, f, n, 9)); }},
      {"input stages", [](CompactEventStore& s, int64_t f, int64_t n) { s.add(1, input_stages(0, f, n)); }},
      {"allocation records", [](CompactEventStore& s, int64_t f, int64_t n) { s.add(1, allocations(f, n)); }},
  };
  for (const Kind& kind : kinds) {
    CompactEventStore store(64 * kMiB, Retention::kLatest);
    for (int64_t first = 0; first < 50'000; first += 100) kind.add(store, first, 100);
    ASSERT_GT(store.held_events(), 90'000u) << kind.name;
    EXPECT_EQ(store.lost_events(), 0u) << kind.name;
    EXPECT_EQ(store.charged_bytes(), store.held_bytes()) << kind.name << ": a recorder reserves nothing";
    const double per_event = static_cast<double>(store.charged_bytes()) / static_cast<double>(store.held_events());
    EXPECT_LE(per_event, 48.0) << kind.name;
    EXPECT_GE(store.held_bytes(), store.record_bytes()) << kind.name;
  }
}

TEST(CompactEventStore, ACaptureAlsoReservesTheBuildOfWhatItHolds) {
  CompactEventStore store(64 * kMiB, Retention::kEarliestAndLatest);
  store.add(1, steps(0, 0, 100, 9));
  EXPECT_GE(store.charged_bytes() - store.held_bytes(), 1000 * CaptureCost::of({}));
  store.take(1);
  EXPECT_EQ(store.charged_bytes(), 0u);
  EXPECT_EQ(store.held_bytes(), 0u);
}

TEST(CompactEventStore, ChunksThatEndedBeforeTheCutoffAgeOutUncountedAndAQuietClientIsForgotten) {
  CompactEventStore store(64 * kMiB, Retention::kLatest);
  for (int64_t s = 0; s < 3000; s += 100) store.add(1, steps(0, s, 100, 9));
  const uint64_t before = store.held_events();
  store.expire_before(kT0 + int64_t{2000} * 1'000'000);
  EXPECT_LT(store.held_events(), before);
  EXPECT_GE(store.oldest_start_ns(), kT0 + int64_t{1500} * 1'000'000);  // at most a chunk's worth before the cutoff
  EXPECT_EQ(store.lost_events(), 0u);
  store.expire_before(kT0 + int64_t{4000} * 1'000'000);
  EXPECT_EQ(store.held_events(), 0u);
  EXPECT_TRUE(store.client_ids().empty());
  EXPECT_EQ(store.charged_bytes(), 0u);
}

TEST(CompactEventStore, EventsWhollyOutsideTheWindowAreNeitherHeldNorCounted) {
  CompactEventStore store(64 * kMiB, Retention::kEarliestAndLatest);
  store.set_window(kT0 + 10 * 1'000'000, kT0 + 20 * 1'000'000);
  store.add(1, steps(0, 0, 30, 1));  // steps 0..29, 1 ms apart, each 0.9 ms long
  const HeldClientEvents held = store.take(1);
  const auto per_step = events_per_step(held);
  ASSERT_FALSE(per_step.empty());
  EXPECT_EQ(per_step.begin()->first, 10);
  EXPECT_EQ(per_step.rbegin()->first, 20);  // it starts at the window's end
  EXPECT_EQ(held.received_events, held.kept_events);
  EXPECT_EQ(held.dropped_events(), 0u);
}

TEST(CompactEventStore, OtherDataIsChargedAndRefusedWhenItCannotFit) {
  CompactEventStore store(4 * kMiB, Retention::kEarliestAndLatest);
  EXPECT_TRUE(store.charge(1, 1 * kMiB));
  const size_t charged = store.charged_bytes();
  EXPECT_GE(charged, 1 * kMiB);
  EXPECT_FALSE(store.charge(1, 8 * kMiB));
  EXPECT_EQ(store.charged_bytes(), charged);
}

}  // namespace
}  // namespace podscope::agent
