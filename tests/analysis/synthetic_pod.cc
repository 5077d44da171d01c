#include "tests/analysis/synthetic_pod.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::analysis::testing {

using xspace::XPlaneBuilder;

bool write_synthetic_pod(const std::filesystem::path& dir, const SyntheticPodSpec& spec) {
  for (int rank = 0; rank < spec.ranks; ++rank) {
    std::ofstream out(dir / ("host" + std::to_string(rank) + ".xplane.pb"), std::ios::binary);
    if (!make_synthetic_rank(spec, rank).SerializeToOstream(&out)) return false;
  }
  return true;
}

int64_t synthetic_step_ns(const SyntheticPodSpec& spec) {
  const int64_t slowest_compute = spec.compute_ns + std::max<int64_t>(0, spec.straggler_delay_ns);
  return spec.input_delay_ns + slowest_compute + spec.all_reduce_compute_ns;
}

std::vector<tensorflow::profiler::XSpace> make_synthetic_pod(const SyntheticPodSpec& spec) {
  std::vector<tensorflow::profiler::XSpace> spaces;
  for (int rank = 0; rank < spec.ranks; ++rank) spaces.push_back(make_synthetic_rank(spec, rank));
  return spaces;
}

namespace {

// Root stage over the whole input time; read and decode split it.
void add_input_stages(xspace::XLineBuilder& line, int64_t start_ns, int64_t duration_ns) {
  line.add_event("load_batch", start_ns, duration_ns)
      .add(xspace::kInputStageCategoryStat, xspace::kInputStageCategories[2])
      .add(xspace::kInputStageIdStat, int64_t{1})
      .add(xspace::kInputStageParentIdStat, int64_t{0});
  line.add_event("read_records", start_ns, duration_ns / 2)
      .add(xspace::kInputStageCategoryStat, xspace::kInputStageCategories[0])
      .add(xspace::kInputStageIdStat, int64_t{2})
      .add(xspace::kInputStageParentIdStat, int64_t{1});
  line.add_event("decode", start_ns + duration_ns / 2, duration_ns / 2)
      .add(xspace::kInputStageCategoryStat, xspace::kInputStageCategories[1])
      .add(xspace::kInputStageIdStat, int64_t{3})
      .add(xspace::kInputStageParentIdStat, int64_t{1});
}

// A synchronous tf.data call chain, each iterator nested in its parent.
void add_tf_data_events(xspace::XLineBuilder& line, int64_t start_ns, int64_t duration_ns) {
  line.add_event("IteratorGetNext", start_ns, duration_ns);
  constexpr std::string_view kIterators[] = {"Iterator::Prefetch", "Iterator::Prefetch::Map",
                                             "Iterator::Prefetch::Map::TFRecord"};
  for (int64_t depth = 0; depth < 3; ++depth) {
    const int64_t inset = duration_ns * (depth + 1) / 8;
    line.add_event(kIterators[depth], start_ns + inset, duration_ns - 2 * inset)
        .add("id", depth + 1)
        .add("parent_id", depth);
  }
}

// A string stat as TF writes repeated strings: a ref_value naming a stat metadata whose name is the text.
void add_ref_stat(XPlaneBuilder& plane, xspace::XLineBuilder& line, std::string_view stat, std::string_view text) {
  tensorflow::profiler::XStat& ref = *line.proto()->mutable_events()->rbegin()->add_stats();
  ref.set_metadata_id(plane.stat_metadata_id(stat));
  ref.set_ref_value(static_cast<uint64_t>(plane.stat_metadata_id(text)));
}

// The TF op of the `index`-th kernel of a step, as `name:Type`.
std::string tf_op_of_kernel(int index) {
  const std::string layer = "model/dense_" + std::to_string(index / 2 % 8);
  return index % 2 == 0 ? layer + "/MatMul:MatMul" : layer + "/Relu:Relu";
}

// A TensorFlow-style kernel (its kernel_details a ref_value, as TF writes it) and its launch on the host just before
// it.
void add_gpu_kernel(XPlaneBuilder& plane, xspace::XLineBuilder& stream, xspace::XLineBuilder& launches, int index,
                    int64_t begin, int64_t end, int64_t correlation_id, bool with_tf_op) {
  const bool gemm = index % 2 == 0;
  auto kernel =
      stream.add_event(gemm ? "volta_fp16_s884gemm_fp16_128x128_nn" : "elementwise_kernel_float", begin, end - begin);
  kernel.add("correlation_id", correlation_id);
  if (gemm) kernel.add(xspace::kFlopsStat, int64_t{1'000'000});
  add_ref_stat(plane, stream, "kernel_details",
               gemm ? "regs:128 static_shared:0 dynamic_shared:49152 grid:64,8,1 block:256,1,1"
                    : "regs:16 static_shared:0 dynamic_shared:0 grid:1024,1,1 block:256,1,1");
  if (with_tf_op) add_ref_stat(plane, stream, "tf_op", tf_op_of_kernel(index));
  launches.add_event("cudaLaunchKernel", begin - 5'000, 3'000).add("correlation_id", correlation_id);
}

// One allocator's state as its TF events record it after each activity.
struct AllocatorState {
  std::string name;
  int64_t capacity = int64_t{16} << 30;
  int64_t allocated = 0;
  int64_t peak = 0;
  uint64_t next_address = 0x7f0000000000;
  std::vector<std::pair<uint64_t, int64_t>> live;  // address, bytes
};

void add_allocator_event(XPlaneBuilder& host, xspace::XLineBuilder& line, AllocatorState& allocator, bool allocation,
                         uint64_t address, int64_t bytes, int64_t at, const std::string& tf_op) {
  line.add_event(allocation ? "MemoryAllocation" : "MemoryDeallocation", at, 200)
      .add("bytes_reserved", int64_t{0})
      .add("bytes_allocated", allocator.allocated)
      .add("bytes_available", allocator.capacity - allocator.allocated)
      .add("peak_bytes_in_use", allocator.peak)
      .add("requested_bytes", bytes)
      .add("allocation_bytes", bytes)
      .add_uint("addr", address)
      .add("data_type", int64_t{19})  // half
      .add("shape", std::string_view("(1024,1024)"));
  add_ref_stat(host, line, "allocator_name", allocator.name);
  add_ref_stat(host, line, "tf_op", tf_op);
  add_ref_stat(host, line, "region_type", "output");
}

// TF's host side of a kernel: the executor's TraceMe of its op around the allocation of its output.
void add_host_op(XPlaneBuilder& host, xspace::XLineBuilder& line, AllocatorState& allocator, int index, int64_t at) {
  const std::string tf_op = tf_op_of_kernel(index);
  line.add_event(tf_op, at, 3'000);
  const int64_t bytes = int64_t{2} << 20;
  const uint64_t address = allocator.next_address;
  allocator.next_address += static_cast<uint64_t>(bytes);
  allocator.allocated += bytes;
  allocator.peak = std::max(allocator.peak, allocator.allocated);
  allocator.live.emplace_back(address, bytes);
  add_allocator_event(host, line, allocator, true, address, bytes, at + 1'000, tf_op.substr(0, tf_op.rfind(':')));
}

void free_step_allocations(XPlaneBuilder& host, xspace::XLineBuilder& line, AllocatorState& allocator, int64_t at) {
  for (const auto& [address, bytes] : allocator.live) {
    allocator.allocated -= bytes;
    add_allocator_event(host, line, allocator, false, address, bytes, at, "");
    at += 300;
  }
  allocator.live.clear();
}

tensorflow::profiler::XSpace make_cpu_program_rank(const SyntheticPodSpec& spec, int rank) {
  tensorflow::profiler::XSpace space;
  space.add_hostnames("host" + std::to_string(rank));
  XPlaneBuilder host(xspace::find_or_add_plane(space, xspace::kHostPlaneName, 0));
  host.stats().add(xspace::kHostNameStat, std::string_view("host" + std::to_string(rank)));
  auto loop = host.line(1, "tf_Compute");
  const int64_t input = std::max<int64_t>(spec.input_delay_ns, 100'000);
  const int64_t compute = spec.compute_ns + (rank == spec.straggler_rank ? spec.straggler_delay_ns : 0);
  const int64_t step_ns = input + compute;
  for (int s = 0; s < spec.steps; ++s) {
    const int64_t t = spec.start_ns + s * (step_ns + spec.gap_ns);
    loop.add_event("train", t, step_ns).add(xspace::kStepNumStat, int64_t{s});
    loop.add_event("IteratorGetNext", t, input);
    loop.add_event("ExecutorState::Process", t + input, compute);
  }
  return space;
}

}  // namespace

tensorflow::profiler::XSpace make_synthetic_rank(const SyntheticPodSpec& pod_spec, int rank) {
  if (pod_spec.cpu_program) return make_cpu_program_rank(pod_spec, rank);
  SyntheticPodSpec spec = pod_spec;
  if (spec.tensorflow_gpu_odd_ranks && rank % 2 == 1) {
    spec.gpu_plane = spec.tf_data_events = spec.tf_ops_and_memory = true;
  }
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

  const std::string plane_name =
      std::string(spec.gpu_plane ? xspace::kGpuPlanePrefix : xspace::kCustomPlanePrefix) + std::to_string(rank);
  XPlaneBuilder core(xspace::find_or_add_plane(space, plane_name, rank));
  auto steps = core.line(1, xspace::kStepsLineName);
  auto ops = core.line(2, spec.gpu_plane ? "Stream #7(Compute)" : "Ops");
  auto chunks = core.line(3, spec.gpu_plane ? "Stream #8(Ring chunks)" : "Ring chunks");
  const int64_t delay = rank == spec.straggler_rank ? spec.straggler_delay_ns : 0;
  const int64_t compute = spec.compute_ns + (spec.straggler_waits_for_input ? 0 : delay);
  const int64_t input = spec.input_delay_ns + (spec.straggler_waits_for_input ? delay : 0);
  std::optional<xspace::XLineBuilder> stages, tf_data, launches, executor;
  AllocatorState allocator;
  allocator.name = "GPU_" + std::to_string(rank) + "_bfc";
  std::optional<XPlaneBuilder> cupti;
  if (spec.input_stages) stages = core.line(4, xspace::kInputPipelineLineName);
  if (spec.tf_data_events) tf_data = host.line(100 + rank, "tf_data");
  if (spec.gpu_plane) {
    cupti.emplace(xspace::find_or_add_plane(space, xspace::kCuptiHostPlaneName, 1));
    launches = cupti->line(100 + rank, "launches");
    if (spec.tf_ops_and_memory) executor = host.line(200 + rank, "tf_Compute/" + std::to_string(rank));
  }
  for (int s = 0; s < spec.steps; ++s) {
    const int64_t t = spec.start_ns + s * period;  // true time
    const int64_t w = t + offset;                  // as this host writes it
    steps.add_event("step", w, step_ns).add(xspace::kStepNumStat, int64_t{s});
    if (input > 0) ops.add_event(xspace::kInfeedEventName, w, input).add(xspace::kStepNumStat, int64_t{s});
    const int64_t compute_start = w + input;
    const int n = std::max(1, spec.compute_events_per_step);
    for (int i = 0; i < n; ++i) {
      const int64_t begin = compute_start + compute * i / n;
      const int64_t end = compute_start + compute * (i + 1) / n;
      if (spec.gpu_plane) {
        add_gpu_kernel(core, ops, *launches, i, begin, end, s * n + i, spec.tf_ops_and_memory);
        if (executor && i % 8 == 0) add_host_op(host, *executor, allocator, i, begin - 10'000);
        continue;
      }
      auto event = ops.add_event(i % 2 == 0 ? "matmul" : "elementwise", begin, end - begin);
      if (i % 2 == 0) event.add(xspace::kFlopsStat, int64_t{1'000'000});
    }
    if (stages) add_input_stages(*stages, w, std::max<int64_t>(input, 100'000));
    if (tf_data) {
      add_tf_data_events(*tf_data, w, std::max<int64_t>(input, 100'000));
      tf_data->add_event("ExecutorState::Process", compute_start, compute);
    }
    if (executor) free_step_allocations(host, *executor, allocator, compute_start + compute);
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
