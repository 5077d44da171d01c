// Terminal pages of the op-level tools (`podscope analyze RUN --tool ...`): the longest kernels, each
// allocator's peak with what was live at it, and the framework ops by self time. Pure functions: text out.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

#include "analysis/tools/kernel_stats.h"
#include "analysis/tools/memory_profile.h"
#include "analysis/tools/op_stats.h"

namespace podscope::analysis {

// The kernel time, the `rows` longest kernel rows as a table, and the warnings.
std::string render_kernel_stats_page(const KernelStatsResult& kernels, size_t rows = 25);

// Per allocator: the in-window peak with its time, step and capacity, the lifetime peak, the `rows` largest
// allocations live at the peak; then the warnings.
std::string render_memory_profile_page(const MemoryProfileResult& memory, size_t rows = 10);

// memory_profile.json: protobuf's JSON form of the profile (every field printed, as XProf prints it), the
// allocators in `memory_ids` order.
absl::StatusOr<std::string> render_memory_profile_json(const tensorflow::profiler::MemoryProfile& profile);

// The device's peaks, then per side (device, host) its self and idle time and its `rows` ops with the most self
// time as a table; then the warnings.
std::string render_op_stats_page(const OpStatsResult& ops, size_t rows = 25);

// One line per kind of warning each tool counted ("" when none), for the pod summary.
std::string render_kernel_stats_warnings(const KernelStatsResult& kernels);
std::string render_memory_profile_warnings(const MemoryProfileResult& memory);
std::string render_op_stats_warnings(const OpStatsResult& ops);

}  // namespace podscope::analysis
