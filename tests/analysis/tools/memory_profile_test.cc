// Memory profile from TensorFlow's allocator events: peak, what was live at it, the timeline's downsampling,
// bad events, and TensorFlow's real file.
#include "analysis/tools/memory_profile.h"
#include "analysis/tools/tool_pages.h"

#include <gtest/gtest.h>

#include <map>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"
#include "proto/xspace/xspace_stream_reader.h"
#include "tests/shared_testdata.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::PerAllocatorMemoryProfile;
using tensorflow::profiler::XPlane;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;

// A host plane whose allocator events keep their own books: each event states the allocator's totals after it.
struct HostPlane {
  XPlane plane;
  xspace::XPlaneBuilder builder{&plane};
  xspace::XLineBuilder thread = builder.line(1, "python3");
  std::map<std::string, int64_t> allocated;

  HostPlane() { plane.set_name(std::string(xspace::kHostPlaneName)); }
  xspace::XStatsBuilder event(std::string_view name, int64_t t, std::string_view allocator, int64_t bytes,
                              uint64_t addr) {
    auto stats = thread.add_event(name, kT0 + t, 0);
    stats.add("allocator_name", allocator)
        .add("bytes_allocated", allocated[std::string(allocator)])
        .add("bytes_available", int64_t{1000} - allocated[std::string(allocator)])
        .add("allocation_bytes", bytes)
        .add("requested_bytes", bytes)
        .add_uint("addr", addr);
    return stats;
  }
  xspace::XStatsBuilder alloc(int64_t t, std::string_view allocator, int64_t bytes, uint64_t addr) {
    allocated[std::string(allocator)] += bytes;
    return event(xspace::kMemoryAllocationEventName, t, allocator, bytes, addr);
  }
  xspace::XStatsBuilder free(int64_t t, std::string_view allocator, int64_t bytes, uint64_t addr) {
    allocated[std::string(allocator)] -= bytes;
    return event(xspace::kMemoryDeallocationEventName, t, allocator, bytes, addr);
  }
};

const PerAllocatorMemoryProfile& allocator(const MemoryProfileResult& r, const std::string& id) {
  static const PerAllocatorMemoryProfile none;
  auto it = r.profile.memory_profile_per_allocator().find(id);
  EXPECT_NE(it, r.profile.memory_profile_per_allocator().end()) << id;
  return it == r.profile.memory_profile_per_allocator().end() ? none : it->second;
}

TEST(MemoryProfileTest, PeakIsTheLargestInUseAndItsLiveAllocationsAreListedBySize) {
  HostPlane host;
  host.alloc(0, "GPU_0_bfc", 100, 0x1000)
      .add("tf_op", "w/Assign")
      .add("region_type", "persist")
      .add("data_type", int64_t{1});
  host.alloc(10, "GPU_0_bfc", 300, 0x2000).add("tf_op", "dense/MatMul").add("shape", "[10,30]");
  host.alloc(20, "GPU_0_bfc", 50, 0x3000).add("tf_op", "relu");
  host.alloc(30, "GPU_0_bfc", 50, 0x4000).add("tf_op", "relu");
  host.free(40, "GPU_0_bfc", 300, 0x2000);  // peak (500) was just before
  host.alloc(50, "GPU_0_bfc", 200, 0x5000);
  host.alloc(60, "GPU_host_bfc", 7, 0x9000);

  const MemoryProfileResult result = xplane_to_memory_profile(host.plane);
  EXPECT_EQ(result.events, 7u);
  ASSERT_EQ(result.profile.memory_ids_size(), 2);
  EXPECT_EQ(result.profile.memory_ids(0), "GPU_0_bfc");
  const auto& gpu = allocator(result, "GPU_0_bfc");
  const auto& summary = gpu.profile_summary();
  EXPECT_EQ(summary.peak_stats().peak_bytes_in_use(), 500);
  EXPECT_EQ(summary.peak_stats().heap_allocated_bytes(), 500);
  EXPECT_EQ(summary.peak_stats_time_ps(), 30'000);  // from the run's first memory event
  EXPECT_EQ(summary.memory_capacity(), 1000);

  // Live at the peak: 300 (MatMul), 100 (Assign), 2 × 50 (relu) folded into one row.
  ASSERT_EQ(gpu.active_allocations_size(), 3);
  std::vector<std::pair<int64_t, int64_t>> rows;  // (bytes, occurrences)
  for (const auto& row : gpu.active_allocations()) {
    ASSERT_GE(row.snapshot_index(), 0);
    EXPECT_EQ(row.special_index(), -1);
    const auto& meta = gpu.memory_profile_snapshots(static_cast<int>(row.snapshot_index())).activity_metadata();
    rows.emplace_back(meta.allocation_bytes(), row.num_occurrences());
  }
  EXPECT_EQ(rows, (std::vector<std::pair<int64_t, int64_t>>{{300, 1}, {100, 1}, {50, 2}}));
  const auto& matmul = gpu.memory_profile_snapshots(0).activity_metadata();
  EXPECT_EQ(matmul.tf_op_name(), "dense/MatMul");
  EXPECT_EQ(matmul.tensor_shape(), "[10,30]");
  const auto& assign = gpu.memory_profile_snapshots(1).activity_metadata();
  EXPECT_EQ(assign.region_type(), "persist");
  EXPECT_EQ(assign.data_type(), "float");

  // The deallocation is described by the allocation it frees.
  ASSERT_EQ(gpu.sampled_timeline_snapshots_size(), 6);
  EXPECT_EQ(gpu.sampled_timeline_snapshots(4).activity_metadata().tf_op_name(), "dense/MatMul");
  EXPECT_EQ(result.freed_from_before.frees, 0u);
}

TEST(MemoryProfileTest, MemoryNoEventAccountsForAndTheStackAreRowsOfTheirOwn) {
  HostPlane host;
  host.allocated["bfc"] = 1000;  // allocated before the window
  host.alloc(0, "bfc", 24, 0x10).add("bytes_reserved", int64_t{64}).add("peak_bytes_in_use", int64_t{5000});
  const MemoryProfileResult result = xplane_to_memory_profile(host.plane);
  const auto& bfc = allocator(result, "bfc");
  EXPECT_EQ(bfc.profile_summary().peak_bytes_usage_lifetime(), 5000);
  ASSERT_EQ(bfc.special_allocations_size(), 2);
  EXPECT_EQ(bfc.special_allocations(0).tf_op_name(), "unused preallocated device memory");
  EXPECT_EQ(bfc.special_allocations(0).allocation_bytes(), 1000);
  EXPECT_EQ(bfc.special_allocations(1).tf_op_name(), "stack");
  EXPECT_EQ(bfc.special_allocations(1).allocation_bytes(), 64);
  ASSERT_EQ(bfc.active_allocations_size(), 3);
  EXPECT_EQ(bfc.active_allocations(0).special_index(), 0);  // largest first
  EXPECT_EQ(bfc.active_allocations(1).special_index(), 1);
  EXPECT_EQ(bfc.active_allocations(2).snapshot_index(), 0);
}

TEST(MemoryProfileTest, TimelineKeepsEachBucketsLargestPoint) {
  HostPlane host;
  for (int i = 0; i < 100; ++i) {
    host.alloc(i * 2, "bfc", 10 + i % 7, 0x100 + i);
    host.free(i * 2 + 1, "bfc", 10 + i % 7, 0x100 + i);
  }
  MemoryProfileBuilder builder;
  builder.add_plane(0, host.plane);
  const MemoryProfileResult result = std::move(builder).finish(10);
  const auto& bfc = allocator(result, "bfc");
  ASSERT_EQ(bfc.sampled_timeline_snapshots_size(), 10);
  int64_t previous = -1;
  for (const auto& s : bfc.sampled_timeline_snapshots()) {
    EXPECT_GT(s.time_offset_ps(), previous);  // in time order
    previous = s.time_offset_ps();
    EXPECT_EQ(s.activity_metadata().memory_activity(), tensorflow::profiler::ALLOCATION);  // the larger of each pair
  }
  EXPECT_EQ(bfc.profile_summary().peak_stats().peak_bytes_in_use(), 16);
}

TEST(MemoryProfileTest, BadEventsAreCountedAndLeaveTheTotalsRight) {
  HostPlane host;
  host.alloc(0, "bfc", 100, 0x1);
  host.free(10, "bfc", 100, 0x1);
  host.allocated["bfc"] += 40;  // the allocation of 0x77 happened before the window
  host.free(20, "bfc", 40, 0x77);
  // An allocation without its allocator's totals.
  auto stats = host.thread.add_event(xspace::kMemoryAllocationEventName, kT0 + 30, 0);
  stats.add("allocator_name", "bfc").add("allocation_bytes", int64_t{1'000'000});
  host.thread.add_event(xspace::kMemoryAllocationEventName, kT0 + 40, 0).add("bytes_allocated", int64_t{1'000'000});
  const MemoryProfileResult result = xplane_to_memory_profile(host.plane);
  EXPECT_EQ(result.warnings.events_missing_stats, 2u);
  // A free of what was allocated before the window is accounted for, not warned of.
  EXPECT_EQ(result.freed_from_before.frees, 1u);
  EXPECT_EQ(result.freed_from_before.bytes, 40);
  EXPECT_EQ(render_memory_profile_warnings(result).find("window"), std::string::npos);
  const auto& bfc = allocator(result, "bfc");
  EXPECT_EQ(bfc.profile_summary().peak_stats().peak_bytes_in_use(), 100);
  EXPECT_EQ(bfc.sampled_timeline_snapshots_size(), 3);
}

TEST(MemoryProfileTest, AllocatorsOfSeveralHostsAreNamedByHost) {
  HostPlane a, b;
  a.builder.stats().add(xspace::kHostNameStat, "worker-a");
  a.alloc(0, "bfc", 1, 0x1);
  b.alloc(0, "bfc", 2, 0x1);
  MemoryProfileBuilder builder;
  builder.add_plane(0, a.plane);
  builder.add_plane(1, b.plane);
  const MemoryProfileResult result = std::move(builder).finish();
  EXPECT_EQ(result.profile.num_hosts(), 2);
  ASSERT_EQ(result.profile.memory_ids_size(), 2);
  EXPECT_EQ(result.profile.memory_ids(0), "file1/bfc");
  EXPECT_EQ(result.profile.memory_ids(1), "worker-a/bfc");
}

TEST(MemoryProfileTest, TensorFlowFilePeakIsTheLargestReservedPlusAllocatedOfEachAllocator) {
  const auto tf_file = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!tf_file) return;
  std::map<std::string, int64_t> expected_peak;
  uint64_t events = 0;
  MemoryProfileBuilder builder;
  const absl::Status status = xspace::read_xspace_planes(
      *tf_file,
      [&](const XPlane& plane) {
        builder.add_plane(0, plane);
        if (plane.name() != xspace::kHostPlaneName) return absl::OkStatus();
        const xspace::XPlaneReader reader(plane);
        for (const auto& line : plane.lines()) {
          reader.for_each_event(line, [&](const xspace::XEventView& e) {
            if (e.name() != xspace::kMemoryAllocationEventName && e.name() != xspace::kMemoryDeallocationEventName)
              return;
            ++events;
            const std::string name(*e.str_stat("allocator_name"));
            const int64_t in_use = *e.int_stat("bytes_reserved") + *e.int_stat("bytes_allocated");
            expected_peak[name] = std::max(expected_peak[name], in_use);
          });
        }
        return absl::OkStatus();
      },
      nullptr, MemoryProfileBuilder::wants_line);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_GT(events, 2000u);
  const MemoryProfileResult result = std::move(builder).finish();
  EXPECT_EQ(result.events, events);
  EXPECT_EQ(result.warnings.events_missing_stats, 0u);
  ASSERT_EQ(static_cast<size_t>(result.profile.memory_ids_size()), expected_peak.size());
  for (const auto& [name, peak] : expected_peak) {
    const auto& profile = allocator(result, name);
    EXPECT_EQ(profile.profile_summary().peak_stats().peak_bytes_in_use(), peak) << name;
    EXPECT_LE(profile.sampled_timeline_snapshots_size(), 1000);
    // The peak table accounts for the whole peak.
    int64_t rows = 0;
    for (const auto& row : profile.active_allocations()) {
      const int index = static_cast<int>(row.snapshot_index() >= 0 ? row.snapshot_index() : row.special_index());
      const auto& meta = row.snapshot_index() >= 0 ? profile.memory_profile_snapshots(index).activity_metadata()
                                                   : profile.special_allocations(index);
      rows += meta.allocation_bytes() * row.num_occurrences();
    }
    EXPECT_EQ(rows, peak) << name;
  }
}

}  // namespace
}  // namespace podscope::analysis
