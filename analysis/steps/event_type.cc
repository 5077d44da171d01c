#include "analysis/steps/event_type.h"

#include "proto/xspace/names.h"

namespace podscope::analysis {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

}  // namespace

EventType device_event_type(OpKind kind, std::string_view op_name, std::string_view tensor_shapes) {
  switch (kind) {
    // Sends and recv-dones are the collectives' transfers (a ring all-reduce's chunks) or point-to-point exchanges
    // between cores: collective communication, as the pod viewer's generic categories count them, not copies.
    case OpKind::kCollective:
    case OpKind::kSend:
    case OpKind::kRecvDone: return EventType::kDeviceCollectives;
    case OpKind::kInfeed: return EventType::kHostWaitInput;
    case OpKind::kOutfeed: return EventType::kDeviceToHost;
    case OpKind::kDeviceToDevice: return EventType::kDeviceToDevice;
    case OpKind::kHostToDevice: return EventType::kHostToDevice;
    case OpKind::kDeviceToHost: return EventType::kDeviceToHost;
    case OpKind::kHighFlopsCompute:
    case OpKind::kLowFlopsCompute: break;
  }
  const bool half =
      tensor_shapes.empty() ? contains(op_name, "half") || contains(op_name, "fp16") : contains(tensor_shapes, "half");
  return half ? EventType::kDeviceCompute16 : EventType::kDeviceCompute32;
}

std::optional<EventType> host_event_type(std::string_view plane_name, std::string_view name, bool has_correlation_id,
                                         bool grouped) {
  if (name.starts_with("IteratorGetNext") || name.starts_with(xspace::kTorchDataLoaderPrefix)) {
    return EventType::kHostWaitInput;
  }
  if (name.starts_with("InfeedEnqueue") || contains(name, "MemcpyH2D") || contains(name, "MemcpyHtoD")) {
    return EventType::kHostToDevice;
  }
  if (plane_name == xspace::kCuptiHostPlaneName) {
    return contains(name, "Launch") ? EventType::kHostPrepare : EventType::kHostRuntime;
  }
  if (has_correlation_id || name.starts_with("ExecutorState::Process")) return EventType::kHostPrepare;
  if (grouped) return EventType::kHostCompute;
  return std::nullopt;
}

GenericBreakdown generic_breakdown(const EventTypeDurations& d) {
  GenericBreakdown g;
  g.unknown_ns = at(d, EventType::kUnknown);
  g.host_wait_input_ns = at(d, EventType::kHostWaitInput);
  g.host_to_device_ns = at(d, EventType::kHostToDevice) + at(d, EventType::kDeviceWaitHost);
  g.output_ns = at(d, EventType::kDeviceToHost);
  g.device_compute_ns = at(d, EventType::kDeviceCompute32) + at(d, EventType::kDeviceCompute16);
  g.device_to_device_ns = at(d, EventType::kDeviceToDevice) + at(d, EventType::kDeviceWaitDevice);
  g.device_collectives_ns = at(d, EventType::kDeviceCollectives);
  g.host_compute_ns = at(d, EventType::kHostCompute) + at(d, EventType::kHostPreprocess) +
                      at(d, EventType::kHostPostprocess) + at(d, EventType::kHostBatchFormation) +
                      at(d, EventType::kHostRuntime) + at(d, EventType::kHostToHost);
  g.host_prepare_ns = at(d, EventType::kHostPrepare);
  g.host_compile_ns = at(d, EventType::kHostCompile);
  return g;
}

}  // namespace podscope::analysis
