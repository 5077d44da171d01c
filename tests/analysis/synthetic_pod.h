// Builds XSpaces shaped like podscope's annotated ring all-reduce trainer (one host file per rank, one
// /device:CUSTOM:<rank> plane each), with a known truth: straggler delay, input delay, per-host clock
// offsets, capture windows. Used by the analysis tests, the report fixture and the analysis benchmark.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "tensorflow/xplane.pb.h"

namespace podscope::analysis::testing {

struct SyntheticPodSpec {
  int ranks = 4;
  int steps = 5;
  int64_t start_ns = 1'700'000'000'000'000'000;  // true (coordinator) time of the first step
  int64_t compute_ns = 30'000'000;
  // Each step's compute is split into this many back-to-back events (volume for benchmarks).
  int compute_events_per_step = 1;
  int straggler_rank = -1;
  int64_t straggler_delay_ns = 0;
  // The straggler spends its delay waiting for input (its infeed and input stages) instead of computing.
  bool straggler_waits_for_input = false;
  int64_t input_delay_ns = 0;
  int64_t all_reduce_compute_ns = 5'000'000;
  int64_t gap_ns = 1'000'000;  // between steps
  // Ring chunks per all-reduce: rank r sends to r+1 on channel 100+r, inside the all-reduce.
  int chunks = 2;
  int64_t link_latency_ns = 50'000;
  int64_t chunk_bytes = 1 << 20;
  bool all_reduce_ids = true;  // false: XLA-style, matched by order within the step
  // Per rank: host clock − coordinator clock, applied to the written times and recorded on /host:CPU.
  std::vector<int64_t> clock_offsets_ns;
  // Written times carry the offset but the host plane records none (what a broken merge looks like).
  bool hide_clock_offsets = false;
  // Record a capture window that cuts the first and last step in half.
  bool cut_edge_steps = false;
  // Input-stage spans on the core plane's Input Pipeline line: per step a root `load_batch` stage (enqueue) over
  // the input delay with its children `read_records` (read) and `decode` (preprocess).
  bool input_stages = false;
  // TensorFlow-style tf.data events on /host:CPU: per step an IteratorGetNext over the input delay around the
  // iterator calls Iterator::Prefetch, Iterator::Prefetch::Map and Iterator::Prefetch::Map::TFRecord (`id`,
  // `parent_id` stats), and executor dispatch (ExecutorState::Process) for every compute op.
  bool tf_data_events = false;
  // The core as a GPU plane (/device:GPU:<rank>, ops on `Stream #` lines, compute kernels with a `kernel_details`
  // stat, the even ones fp16 by name) with a cudaLaunchKernel per kernel on /host:CUPTI, instead of a
  // /device:CUSTOM:<rank> plane.
  bool gpu_plane = false;
  // With gpu_plane: TensorFlow's host side of every 8th kernel on a `tf_Compute` line of /host:CPU: the op's
  // executor TraceMe (`name:Type`) around a MemoryAllocation of its output on the rank's `GPU_<rank>_bfc` (stats
  // allocator_name, bytes_reserved, bytes_allocated, bytes_available, peak_bytes_in_use, requested_bytes,
  // allocation_bytes, addr, tf_op, region_type, data_type, shape, as TF writes them), freed by a
  // MemoryDeallocation at the end of the step; and every kernel's `tf_op` (a ref_value, as TF writes it).
  bool tf_ops_and_memory = false;
  // Each rank a TensorFlow program on CPU instead: no device plane, its /host:CPU plane holding per step a `train`
  // marker (step_num), an IteratorGetNext over the input delay (at least 100 µs) and the executor's
  // ExecutorState::Process over the compute (a straggler's longer); no collectives.
  bool cpu_program = false;
  // Odd ranks as TensorFlow GPU hosts (gpu_plane, tf_data_events, tf_ops_and_memory), even ones annotated: a pod in
  // which every tool has events on some host.
  bool tensorflow_gpu_odd_ranks = false;
};

// One XSpace per rank, in rank order.
std::vector<tensorflow::profiler::XSpace> make_synthetic_pod(const SyntheticPodSpec& spec);

// Rank `rank`'s XSpace alone (what make_synthetic_pod returns at that index).
tensorflow::profiler::XSpace make_synthetic_rank(const SyntheticPodSpec& spec, int rank);

// Writes the pod into `dir` as host<rank>.xplane.pb; false when a file cannot be written.
bool write_synthetic_pod(const std::filesystem::path& dir, const SyntheticPodSpec& spec);

// Duration of one step of rank `rank` (all ranks end each step together).
int64_t synthetic_step_ns(const SyntheticPodSpec& spec);

}  // namespace podscope::analysis::testing
