// The one classification table: which events on a device plane are ops, and what kind of time each is.
// See docs/analysis.md for the table and the overlap priority.
#pragma once

#include <array>
#include <string_view>

namespace podscope::analysis {

// Where a plane's events come from, which decides which of its lines hold ops.
enum class PlaneKind { kCustom, kTpu, kGpu };

// What an op's time counts as. Declared in overlap priority order: when ops overlap on a core, the time
// goes to the kind declared first (see docs/analysis.md).
enum class OpKind : int {
  kCollective = 0,  // all-reduce and other collectives; split into sync and compute across cores
  kInfeed,
  kOutfeed,
  kSend,
  kRecvDone,
  kHighFlopsCompute,
  kLowFlopsCompute,
  kHostToDevice,
  kDeviceToHost,
  kDeviceToDevice,
};
inline constexpr int kOpKindCount = 10;
// Every kind, the highest priority first (priority_sweep.h): declaration order.
inline constexpr std::array<OpKind, kOpKindCount> kOpKindsByPriority = [] {
  std::array<OpKind, kOpKindCount> kinds{};
  for (int k = 0; k < kOpKindCount; ++k) kinds[k] = static_cast<OpKind>(k);
  return kinds;
}();

// Lines that hold a plane's ops: GPU "Stream #N(...)" lines, the TPU "XLA Ops" line, every line of an
// annotated core except Steps, counters and its input pipeline (host-side stages, read by the step model).
// Derived lines (TensorFlow Ops, name scopes, modules) repeat the same time and are skipped.
bool is_op_line(PlaneKind kind, std::string_view line_name);

// Kind of an op by its event name and line name. `has_flops` says the event carries a positive `flops`
// stat, which makes compute high-flops whatever its name.
OpKind classify_op(std::string_view event_name, std::string_view line_name, bool has_flops);

// The event name without an XLA-style ".N" suffix ("all-reduce.3" -> "all-reduce").
std::string_view strip_instance_suffix(std::string_view name);

std::string_view op_kind_name(OpKind kind);

}  // namespace podscope::analysis
