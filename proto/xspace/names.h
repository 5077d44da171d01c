// Names that writers and readers of XSpaces must agree on. They follow TensorFlow/XLA/XProf where those
// tools have a name for the same thing, so one analysis reads podscope's traces and TF/JAX ones alike.
#pragma once

#include <string_view>

namespace podscope::xspace {

// Planes.
inline constexpr std::string_view kHostPlaneName = "/host:CPU";
inline constexpr std::string_view kCuptiHostPlaneName = "/host:CUPTI";
inline constexpr std::string_view kGpuPlanePrefix = "/device:GPU:";
inline constexpr std::string_view kTpuPlanePrefix = "/device:TPU:";
// One plane per core that an annotated process declared; its plane id is the core id.
inline constexpr std::string_view kCustomPlanePrefix = "/device:CUSTOM:";

// Lines.
inline constexpr std::string_view kCountersLineName = "_counters_";  // XProf draws it as counter tracks
inline constexpr std::string_view kStepsLineName = "Steps";
inline constexpr std::string_view kXlaOpsLineName = "XLA Ops";
inline constexpr std::string_view kTensorFlowOpsLineName = "TensorFlow Ops";
// On a GPU's plane: the collectives its process ran on the host (a CPU backend such as gloo, with the tensors on the
// GPU). The GPU waits for them as for a collective of its own, so the step tools read them as the core's collectives.
inline constexpr std::string_view kHostCollectivesLineName = "Host collectives";

// Event names of annotated operations (XLA spelling; readers also accept a ".N" suffix).
inline constexpr std::string_view kInfeedEventName = "infeed";
inline constexpr std::string_view kOutfeedEventName = "outfeed";
inline constexpr std::string_view kAllReduceEventName = "all-reduce";
inline constexpr std::string_view kSendEventName = "send";
inline constexpr std::string_view kRecvDoneEventName = "recv-done";
// TF host step markers (TraceMe events on /host:CPU lines) start with one of these: Keras's `train` /
// `test` (also `train_step`...), TF's `TraceContext` (HostEventType::kTraceContext), and Keras 3's step function
// `multi_step_on_iterator` (its model.fit on TensorFlow writes no `train` marker: one call per step, or per
// `steps_per_execution` steps).
inline constexpr std::string_view kHostStepMarkerPrefixes[] = {"train", "test", "TraceContext",
                                                               "multi_step_on_iterator"};
// NVTX ranges that libpodscope_cupti records land on `/host:CPU`, one line per thread ("NVTX thread <tid>"); a
// CUDA program marks its steps with a range whose name starts with one of these (`step`, `train_step`...).
inline constexpr std::string_view kNvtxLinePrefix = "NVTX thread ";
inline constexpr std::string_view kNvtxStepRangePrefixes[] = {"train", "step"};

// What XProf's host-side step grouping reads, written on the host plane for each annotated core (XProf ignores
// `/device:CUSTOM:` planes): a line "Step markers core <core>" holding per step a root event (kRootEventStat = 1,
// XProf's `_r`, with a step_num) named as the step, and nested in it the core's op time and input time in the
// step as segments; the input segments carry XProf's input stage stat, which makes them waiting for input.
inline constexpr std::string_view kHostStepMarkersLinePrefix = "Step markers core ";
inline constexpr std::string_view kHostStepOpsEventName = "annotated ops";
inline constexpr std::string_view kHostStepInputEventName = "annotated input";
inline constexpr std::string_view kRootEventStat = "_r";
inline constexpr std::string_view kInputPipelineStageNameStat = "_ipl_stage_name";

// Input-pipeline stages that an annotated process declared (a DataLoader's read, decode, copy...): events on
// this line of its `/device:CUSTOM:<core>` plane, named by the stage, each with its category (one of the
// kInputStageCategories), and its id and its parent's id (0: a root stage), which form the stage tree.
inline constexpr std::string_view kInputPipelineLineName = "Input Pipeline";
// The allocation records of one annotated process, on the host plane: "Memory Allocations pid <P> (<program>)",
// TensorFlow's MemoryAllocation / MemoryDeallocation events with its allocator stats (xplane_schema).
inline constexpr std::string_view kMemoryAllocationsLinePrefix = "Memory Allocations";
inline constexpr std::string_view kMemoryAllocationEventName = "MemoryAllocation";
inline constexpr std::string_view kMemoryDeallocationEventName = "MemoryDeallocation";
inline constexpr std::string_view kAllocatorNameStat = "allocator_name";
inline constexpr std::string_view kBytesAllocatedStat = "bytes_allocated";
inline constexpr std::string_view kBytesReservedStat = "bytes_reserved";
inline constexpr std::string_view kPeakBytesInUseStat = "peak_bytes_in_use";
inline constexpr std::string_view kRequestedBytesStat = "requested_bytes";
inline constexpr std::string_view kAllocationBytesStat = "allocation_bytes";
inline constexpr std::string_view kAddressStat = "addr";
inline constexpr std::string_view kTfOpStat = "tf_op";
inline constexpr std::string_view kInputStageCategoryStat = "input_stage_category";
inline constexpr std::string_view kInputStageIdStat = "input_stage_id";
inline constexpr std::string_view kInputStageParentIdStat = "input_stage_parent_id";
inline constexpr std::string_view kInputStageCategories[] = {"read", "preprocess", "enqueue"};
// torch.profiler's annotation of each batch a PyTorch DataLoader yields
// (`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`): the host waiting for input, as TF's
// IteratorGetNext.
inline constexpr std::string_view kTorchDataLoaderPrefix = "enumerate(DataLoader)#";

// TensorFlow's tf.data events on `/host:CPU` lines. An iterator's GetNext is named by its path from the root,
// `Iterator::<Root>::...::<Kind>` (a root has exactly two `::`-separated parts), with stats `id` and, below the
// root, `parent_id`. An async iterator (Prefetch, ParallelMap...) hands elements over between threads: the
// consuming call holds `<Kind>Consume`, the background thread's `<Kind>Produce` holds the child iterator's call,
// both with the same `element_id`.
inline constexpr std::string_view kIteratorEventPrefix = "Iterator::";
inline constexpr std::string_view kIteratorIdStat = "id";
inline constexpr std::string_view kIteratorParentIdStat = "parent_id";
inline constexpr std::string_view kElementIdStat = "element_id";
inline constexpr std::string_view kProduceEventSuffix = "Produce";
inline constexpr std::string_view kConsumeEventSuffix = "Consume";

// Event stats.
inline constexpr std::string_view kStepNumStat = "step_num";
// On a step event (Steps line): the examples one core processes in the step, when the program says so.
inline constexpr std::string_view kBatchSizeStat = "batch_size";
// TF's other step-number stats on host step markers (TraceMe events on /host:CPU).
inline constexpr std::string_view kIterNumStat = "iter_num";
inline constexpr std::string_view kStepIdStat = "step_id";
inline constexpr std::string_view kStepNameStat = "step_name";
inline constexpr std::string_view kGroupIdStat = "group_id";
// CUPTI's link between a host runtime call and the kernel, copy or memset it launched on the device.
inline constexpr std::string_view kCorrelationIdStat = "correlation_id";
// On a GPU's device ops, as TF's GPU tracer writes them (xplane_schema): a kernel's launch details, the CUDA context,
// stream and device, and the collective (NCCL) a kernel runs.
inline constexpr std::string_view kKernelDetailsStat = "kernel_details";
inline constexpr std::string_view kContextIdStat = "context_id";
inline constexpr std::string_view kStreamIdStat = "stream_id";
inline constexpr std::string_view kDeviceIdStat = "device_id";
inline constexpr std::string_view kCollectiveStat = "collective";
// On a device op: the framework op that launched it, named in full as its framework names it (PyTorch's
// `aten::mm`), where TF's `tf_op` would be `name:Type`.
inline constexpr std::string_view kFrameworkOpStat = "framework_op";
inline constexpr std::string_view kAllReduceIdStat = "all_reduce_id";
inline constexpr std::string_view kChannelIdStat = "channel_id";
inline constexpr std::string_view kBytesStat = "bytes";
inline constexpr std::string_view kFlopsStat = "flops";
inline constexpr std::string_view kBytesAccessedStat = "bytes_accessed";
inline constexpr std::string_view kSrcCoreStat = "src_core";
inline constexpr std::string_view kDstCoreStat = "dst_core";
inline constexpr std::string_view kReplicaGroupStat = "replica_group";
inline constexpr std::string_view kCounterValueStat = "value";  // the value of a `_counters_` event

// Plane / space stats that describe where the data came from. The pod analysis reads host_name, the
// capture window and the clock offset as stats of each file's `/host:CPU` plane (times in that host's
// clock); a device plane's own host_name stat, if any, wins for that plane.
inline constexpr std::string_view kHostNameStat = "host_name";
// A device plane's rank in its job (a PyTorch rank's GPU): its core id in the pod.
inline constexpr std::string_view kRankStat = "rank";
inline constexpr std::string_view kCoreCountStat = "core_count";
inline constexpr std::string_view kMemorySizeStat = "memory_size";
inline constexpr std::string_view kCaptureStartStat = "capture_start_ns";
inline constexpr std::string_view kCaptureEndStat = "capture_end_ns";
// A flight recorder window's: from when on (agent clock) every annotated process's events are held whole.
inline constexpr std::string_view kRecordedWholeSinceStat = "recorded_whole_since_ns";
inline constexpr std::string_view kClockOffsetStat = "clock_offset_ns";  // host clock − coordinator clock
inline constexpr std::string_view kClockRttStat = "clock_rtt_ns";
inline constexpr std::string_view kClockDriftStat = "clock_drift_ppm";
// On a `/device:CUSTOM:<core>` plane: the annotating process, and the events and whole steps of that core
// that the agent's capture memory budget dropped (present only when some were).
inline constexpr std::string_view kClientPidStat = "client_pid";
inline constexpr std::string_view kDroppedEventsStat = "dropped_events";
inline constexpr std::string_view kDroppedStepsStat = "dropped_steps";

}  // namespace podscope::xspace
