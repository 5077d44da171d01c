// The event types of the step model, with XProf's overlap priorities: when events overlap within a step, the
// time goes to the type with the higher priority (priority = 10 × the enum value). Alongside, not instead of,
// the pod viewer's categories (step_category.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "analysis/steps/op_classifier.h"

namespace podscope::analysis {

enum class EventType : int {
  kUnknown = 0,  // also the time no event explains (idle)
  kHostCompute,
  kHostPreprocess,
  kHostPostprocess,
  kHostBatchFormation,
  kHostRuntime,
  kHostCompile,
  kHostToHost,
  kHostToDevice,
  kHostPrepare,  // kernel launch
  kDeviceCollectives,
  kHostWaitInput,
  kDeviceToDevice,
  kDeviceToHost,
  kDeviceCompute32,
  kDeviceCompute16,
  kDeviceWaitDevice,
  kDeviceWaitHost,
};
inline constexpr int kEventTypeCount = 18;
// Every type, the highest priority first (priority_sweep.h).
inline constexpr std::array<EventType, kEventTypeCount> kEventTypesByPriority = [] {
  std::array<EventType, kEventTypeCount> types{};
  for (int t = 0; t < kEventTypeCount; ++t) types[t] = static_cast<EventType>(kEventTypeCount - 1 - t);
  return types;
}();

using EventTypeDurations = std::array<int64_t, kEventTypeCount>;

inline int64_t& at(EventTypeDurations& d, EventType t) { return d[static_cast<int>(t)]; }
inline int64_t at(const EventTypeDurations& d, EventType t) { return d[static_cast<int>(t)]; }

inline constexpr int event_type_priority(EventType type) { return 10 * static_cast<int>(type); }
inline constexpr bool is_device_event_type(EventType type) {
  return type == EventType::kDeviceCollectives || type >= EventType::kDeviceToDevice;
}

// The type of a device op of kind `kind`. Compute is 16-bit by XProf's rule: the `shape` stat (tensor shapes), when
// present, names a half type; otherwise the op's name says half or fp16.
EventType device_event_type(OpKind kind, std::string_view op_name, std::string_view tensor_shapes);

// The type of an event on a host plane (/host:CPU, /host:CUPTI), or nullopt for events that are not step work:
// waits for input (IteratorGetNext*, a PyTorch DataLoader's batches), kernel launches (CUDA launch API calls, events
// with a correlation id, TF executor dispatch), host-to-device copies and infeed enqueues, other CUDA API calls
// (runtime), and, for events TF grouped into a step (`grouped`), host compute.
std::optional<EventType> host_event_type(std::string_view plane_name, std::string_view event_name,
                                         bool has_correlation_id, bool grouped);

// The generic GPU breakdown (XProf's PerGenericStepDetails fields) as sums of event types.
struct GenericBreakdown {
  int64_t unknown_ns = 0;
  int64_t host_wait_input_ns = 0;
  int64_t host_to_device_ns = 0;
  int64_t output_ns = 0;
  int64_t device_compute_ns = 0;
  int64_t device_to_device_ns = 0;
  int64_t device_collectives_ns = 0;
  int64_t host_compute_ns = 0;
  int64_t host_prepare_ns = 0;
  int64_t host_compile_ns = 0;
  int64_t input_ns() const { return host_wait_input_ns + host_to_device_ns; }
};
GenericBreakdown generic_breakdown(const EventTypeDurations& d);

}  // namespace podscope::analysis
