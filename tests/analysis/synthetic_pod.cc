#include "tests/analysis/synthetic_pod.h"

#include <algorithm>
#include <string>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::analysis::testing {

using xspace::XPlaneBuilder;

int64_t synthetic_step_ns(const SyntheticPodSpec& spec) {
  const int64_t slowest_compute = spec.compute_ns + std::max<int64_t>(0, spec.straggler_delay_ns);
  return spec.input_delay_ns + slowest_compute + spec.all_reduce_compute_ns;
}

std::vector<tensorflow::profiler::XSpace> make_synthetic_pod(const SyntheticPodSpec& spec) {
  std::vector<tensorflow::profiler::XSpace> spaces;
  for (int rank = 0; rank < spec.ranks; ++rank) spaces.push_back(make_synthetic_rank(spec, rank));
  return spaces;
}

tensorflow::profiler::XSpace make_synthetic_rank(const SyntheticPodSpec& spec, int rank) {
  tensorflow::profiler::XSpace space;
  const int64_t step_ns = synthetic_step_ns(spec);
  const int64_t period = step_ns + spec.gap_ns;
  const int64_t offset = rank < static_cast<int>(spec.clock_offsets_ns.size()) ? spec.clock_offsets_ns[rank] : 0;
  space.add_hostnames("host" + std::to_string(rank));
  XPlaneBuilder host(xspace::find_or_add_plane(space, xspace::kHostPlaneName, 0));
  host.stats().add(xspace::kHostNameStat, std::string_view("host" + std::to_string(rank)));
  if (!spec.hide_clock_offsets) host.stats().add(xspace::kClockOffsetStat, offset);
  if (spec.cut_edge_steps) {
    host.stats().add(xspace::kCaptureStartStat, spec.start_ns + offset + step_ns / 2);
    host.stats().add(xspace::kCaptureEndStat, spec.start_ns + offset + (spec.steps - 1) * period + step_ns / 2);
  }

  const std::string plane_name = std::string(xspace::kCustomPlanePrefix) + std::to_string(rank);
  XPlaneBuilder core(xspace::find_or_add_plane(space, plane_name, rank));
  auto steps = core.line(1, xspace::kStepsLineName);
  auto ops = core.line(2, "Ops");
  auto chunks = core.line(3, "Ring chunks");
  const int64_t compute = spec.compute_ns + (rank == spec.straggler_rank ? spec.straggler_delay_ns : 0);
  for (int s = 0; s < spec.steps; ++s) {
    const int64_t t = spec.start_ns + s * period;  // true time
    const int64_t w = t + offset;                  // as this host writes it
    steps.add_event("step", w, step_ns).add(xspace::kStepNumStat, int64_t{s});
    if (spec.input_delay_ns > 0) {
      ops.add_event(xspace::kInfeedEventName, w, spec.input_delay_ns).add(xspace::kStepNumStat, int64_t{s});
    }
    const int64_t compute_start = w + spec.input_delay_ns;
    const int n = std::max(1, spec.compute_events_per_step);
    for (int i = 0; i < n; ++i) {
      const int64_t begin = compute_start + compute * i / n;
      const int64_t end = compute_start + compute * (i + 1) / n;
      auto event = ops.add_event(i % 2 == 0 ? "matmul" : "elementwise", begin, end - begin);
      if (i % 2 == 0) event.add(xspace::kFlopsStat, int64_t{1'000'000});
    }
    const int64_t all_reduce_start = compute_start + compute;
    const int64_t all_arrived = w + step_ns - spec.all_reduce_compute_ns;
    const int64_t all_reduce_end = w + step_ns;
    auto ar = ops.add_event(spec.all_reduce_ids ? "all-reduce" : "all-reduce.1", all_reduce_start,
                            all_reduce_end - all_reduce_start);
    ar.add(xspace::kStepNumStat, int64_t{s}).add(xspace::kBytesStat, spec.chunk_bytes * spec.chunks);
    ar.add(xspace::kReplicaGroupStat, std::string_view("0,1,2,3"));
    if (spec.all_reduce_ids) ar.add(xspace::kAllReduceIdStat, int64_t{7});
    // Ring chunks: this rank sends to the next and receives from the previous.
    for (int k = 0; k < spec.chunks; ++k) {
      const int64_t chunk_start = all_arrived + spec.all_reduce_compute_ns * k / std::max(1, spec.chunks);
      const int next = (rank + 1) % spec.ranks;
      const int prev = (rank + spec.ranks - 1) % spec.ranks;
      chunks.add_event(xspace::kSendEventName, chunk_start, 10'000)
          .add(xspace::kChannelIdStat, int64_t{100 + rank})
          .add(xspace::kStepNumStat, int64_t{s})
          .add(xspace::kBytesStat, spec.chunk_bytes)
          .add(xspace::kSrcCoreStat, int64_t{rank})
          .add(xspace::kDstCoreStat, int64_t{next});
      chunks.add_event(xspace::kRecvDoneEventName, chunk_start + 2'000, spec.link_latency_ns - 2'000)
          .add(xspace::kChannelIdStat, int64_t{100 + prev})
          .add(xspace::kStepNumStat, int64_t{s})
          .add(xspace::kBytesStat, spec.chunk_bytes)
          .add(xspace::kSrcCoreStat, int64_t{prev})
          .add(xspace::kDstCoreStat, int64_t{rank});
    }
  }
  return space;
}

}  // namespace podscope::analysis::testing
