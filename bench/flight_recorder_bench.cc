// The agent's cost of the flight recorder per event, Google Benchmark, in one run against today's capture:
//   BM_CaptureWindowAdd — a capture window holding a batch (CompactEventStore, earliest and latest kept): for each
//                         record kind the bytes held per event and those its budget is charged
//   BM_RecorderAdd      — the recorder holding a batch (the same store keeping the latest, its time window
//                         expired on every batch), in steady state: full, dropping its oldest chunks; for
//                         each record kind (steps and computes, input stages, allocation records) the bytes
//                         held per held event (`held_bytes_per_event`, what the cap is charged)
//   BM_RecorderSnapshot — a 2 s snapshot copied out of a recorder holding 30 s (per event copied)
//   BM_SnapshotBuild    — a snapshot's XSpace built from 500 k held events, whole (as before) or streamed: the
//                         build's resident peak per event held
// Batches are what a client sends every 50 ms: a step and 9 computes per step, 1000 events, one name.
// The client's own cost with the recorder on is the active annotation cost (client_annotation_bench's
// BM_SpanActive): recording streams exactly what a capture window streams.
#include <benchmark/benchmark.h>

#include <malloc.h>

#include <cstring>
#include <fstream>
#include <string>

#include "agent/events/compact_event_store.h"
#include "agent/local/custom_planes.h"
#include "agent/local/recorded_events.h"
#include "proto/xspace/names.h"

namespace {

using podscope::local::EventKind;

// A batch of `events` events starting at `start_ns`, 10 µs apart: steps of a step and 9 computes.
podscope::local::EventsMsg batch_at(int64_t start_ns, int events) {
  podscope::local::EventsMsg batch;
  batch.session = 1;
  batch.core = 0;
  batch.thread_id = 7;
  batch.names = {{1, "train"}, {2, "matmul"}};
  for (int i = 0; i < events; ++i) {
    podscope::local::EventMsg e;
    const bool step = i % 10 == 0;
    e.kind = step ? EventKind::kStep : EventKind::kCompute;
    e.id = step ? 1 : 2;
    e.start_ns = start_ns + i * 10'000;
    e.duration_ns = step ? 100'000 : 9'000;
    e.value = step ? i / 10 : 1 << 20;
    e.value2 = step ? 0 : 4096;
    batch.events.push_back(e);
  }
  return batch;
}

constexpr int kBatch = 1000;

// The same events as input stages: a root stage and a read stage nested in it, 10 µs apart.
podscope::local::InputStagesMsg stages_at(int64_t start_ns, int events) {
  podscope::local::InputStagesMsg batch;
  batch.session = 1;
  batch.core = 0;
  batch.thread_id = 8;
  batch.names = {{3, "input_batch"}, {4, "read_batch"}};
  for (int i = 0; i < events; ++i) {
    const bool root = i % 2 == 0;
    const uint64_t id = (uint64_t{1} << 40) | static_cast<uint64_t>(i);
    batch.stages.push_back(
        {root ? 3u : 4u,
         root ? podscope::local::InputStageCategory::kPreprocess : podscope::local::InputStageCategory::kRead, id,
         root ? 0 : id - 1, start_ns + i * 10'000, root ? 9'000 : 4'000});
  }
  return batch;
}

// The same events as allocation records: an allocation and its free, of a 64 KiB buffer of a real heap.
podscope::local::AllocationsMsg allocations_at(int64_t start_ns, int events) {
  podscope::local::AllocationsMsg batch;
  batch.session = 1;
  batch.core = 0;
  batch.thread_id = 9;
  batch.names = {{5, "gpu_bfc"}, {6, "matmul"}};
  for (int i = 0; i < events; ++i) {
    const bool allocate = i % 2 == 0;
    const uint64_t address = 0x7f3a'2000'0000 + static_cast<uint64_t>(i / 2 % 64) * 65536;
    batch.allocations.push_back(
        {allocate ? podscope::local::AllocationOp::kAllocate : podscope::local::AllocationOp::kFree, 5, 6, address,
         allocate ? 65536 : 0, start_ns + i * 10'000});
  }
  return batch;
}

// A capture window's store per record kind (0: steps and computes, 1: input stages, 2: allocation records): the
// bytes held per event and what the capture's budget is charged per event (held and the build's reservation).
void BM_CaptureWindowAdd(benchmark::State& state) {
  podscope::agent::CompactEventStore store(size_t{256} << 20, podscope::agent::Retention::kEarliestAndLatest);
  int64_t t = 1'000'000'000;
  for (auto _ : state) {
    switch (state.range(0)) {
      case 0: store.add(1, batch_at(t, kBatch)); break;
      case 1: store.add(1, stages_at(t, kBatch)); break;
      default: store.add(1, allocations_at(t, kBatch)); break;
    }
    t += kBatch * 10'000;
  }
  const double held = static_cast<double>(store.held_events());
  state.counters["held_bytes_per_event"] = static_cast<double>(store.held_bytes()) / held;
  state.counters["charged_bytes_per_event"] = static_cast<double>(store.charged_bytes()) / held;
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_CaptureWindowAdd)->Arg(0)->Arg(1)->Arg(2);

void BM_RecorderAdd(benchmark::State& state) {
  int64_t t = 1'000'000'000;
  podscope::agent::RecordedEvents recorder({30'000'000'000, size_t{64} << 20}, [&t] { return t; });
  podscope::agent::LocalClientInfo client;
  client.connection = 1;
  for (auto _ : state) {
    switch (state.range(0)) {
      case 0: recorder.add(client, batch_at(t, kBatch)); break;
      case 1: recorder.add(client, stages_at(t, kBatch)); break;
      default: recorder.add(client, allocations_at(t, kBatch)); break;
    }
    t += kBatch * 10'000;
  }
  const auto s = recorder.state();
  state.counters["held_events"] = static_cast<double>(s.held_events);
  state.counters["dropped_events"] = static_cast<double>(s.dropped_events);
  state.counters["held_MiB"] = static_cast<double>(s.held_bytes) / (1 << 20);
  state.counters["held_bytes_per_event"] = static_cast<double>(s.held_bytes) / static_cast<double>(s.held_events);
  state.SetItemsProcessed(state.iterations() * kBatch);
}
// 0: steps and computes, 1: input stages, 2: allocation records.
BENCHMARK(BM_RecorderAdd)->Arg(0)->Arg(1)->Arg(2);

void BM_RecorderSnapshot(benchmark::State& state) {
  int64_t t = 1'000'000'000;
  // 30 s of 1 k events/s: a slow ring_trainer rank's rate.
  podscope::agent::RecordedEvents recorder({30'000'000'000, size_t{64} << 20}, [&t] { return t; });
  podscope::agent::LocalClientInfo client;
  client.connection = 1;
  for (int i = 0; i < 30; ++i) {
    podscope::local::EventsMsg b = batch_at(t, kBatch);
    for (auto& e : b.events) e.start_ns = t + (e.start_ns - t) * 100;  // 1 ms apart
    recorder.add(client, b);
    t += 1'000'000'000;
  }
  size_t copied = 0;
  for (auto _ : state) {
    auto captures = recorder.window(t - 2'000'000'000, t);
    for (const auto& c : captures) copied += c.events.kept_events;
    benchmark::DoNotOptimize(captures);
  }
  state.SetItemsProcessed(static_cast<int64_t>(copied));
}
BENCHMARK(BM_RecorderSnapshot);

// The process's resident peak (VmHWM), after resetting it to what is resident now.
int64_t status_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::strlen(field) + 1));
  }
  return 0;
}
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// A snapshot's build of 500 k held events (steps and computes of one client, 10 s), into the serialized XSpace
// an answer carries: arg 0 builds the whole XSpace as objects, then serializes it (how every snapshot was built);
// arg 1 writes the annotated core's plane and the host plane's step markers to the wire while they are built (how
// snapshots are built now). Counters:
// the build's resident peak above the held recorder, per event held, and per byte of the answer.
void BM_SnapshotBuild(benchmark::State& state) {
  int64_t t = 1'000'000'000;
  podscope::agent::RecordedEvents recorder({30'000'000'000, size_t{64} << 20}, [&t] { return t; });
  podscope::agent::LocalClientInfo client;
  client.connection = 1;
  client.pid = 7;
  const int64_t begin = t;
  for (int i = 0; i < 500; ++i) {
    recorder.add(client, batch_at(t, kBatch));
    t += kBatch * 20'000;
  }
  const podscope::Clock clock;
  double peak_kib = 0, answer_bytes = 0;
  for (auto _ : state) {
    malloc_trim(0);
    reset_peak_rss();
    const int64_t before = status_kib("VmRSS:");
    std::string bytes;
    {
      std::vector<podscope::agent::LocalClientCapture> captures = recorder.window(begin, t);
      tensorflow::profiler::XSpace space;
      tensorflow::profiler::XPlane* host = podscope::xspace::find_or_add_plane(space, podscope::xspace::kHostPlaneName);
      podscope::xspace::XPlaneStreamWriter host_stream(*host);
      podscope::agent::CustomPlaneOptions window{begin, t};
      if (state.range(0) == 1) {
        window.serialized_planes = &bytes;
        window.host_plane_stream = &host_stream;
      }
      podscope::agent::add_custom_planes(captures, clock, window, space);
      std::vector<podscope::agent::LocalClientCapture>().swap(captures);
      if (state.range(0) == 1) {
        host_stream.finish(bytes);
        space.mutable_planes()->DeleteSubrange(0, 1);
      }
      space.AppendToString(&bytes);
    }
    peak_kib = static_cast<double>(status_kib("VmHWM:") - before);
    answer_bytes = static_cast<double>(bytes.size());
    benchmark::DoNotOptimize(bytes);
  }
  const double events = static_cast<double>(recorder.state().held_events);
  state.counters["held_events"] = events;
  state.counters["peak_bytes_per_event"] = peak_kib * 1024 / events;
  state.counters["answer_bytes_per_event"] = answer_bytes / events;
  state.counters["peak_per_answer_byte"] = peak_kib * 1024 / answer_bytes;
}
BENCHMARK(BM_SnapshotBuild)->Arg(0)->Arg(1)->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
