#include "analysis/tools/tool_pages.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/rendering/json_writer.h"
#include "analysis/rendering/renderers.h"

namespace podscope::analysis {
namespace {

constexpr size_t kNameWidth = 60;

std::string clipped(const std::string& text, size_t width) {
  return text.size() <= width ? text : text.substr(0, width - 3) + "...";
}

std::string dims(const google::protobuf::RepeatedField<uint32_t>& d) {
  return d.size() == 3 ? absl::StrCat(d[0], ",", d[1], ",", d[2]) : std::string("?");
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// One "warning: TOOL: COUNT TEXT" line per counted problem, none for a count of 0.
struct CountedProblem {
  uint64_t count;
  const char* text;
};

std::string warning_lines(const char* tool, std::initializer_list<CountedProblem> problems) {
  std::string out;
  for (const CountedProblem& p : problems) {
    if (p.count > 0) absl::StrAppendFormat(&out, "warning: %s: %d %s\n", tool, p.count, p.text);
  }
  return out;
}

}  // namespace

std::string render_kernel_stats_warnings(const KernelStatsResult& kernels) {
  return warning_lines("kernel stats",
                       {{kernels.warnings.corrupt_kernel_details,
                         "kernels with unreadable kernel_details (counted, with the default launch configuration)"}});
}

std::string render_memory_profile_warnings(const MemoryProfileResult& memory) {
  const MemoryProfileWarnings& w = memory.warnings;
  return warning_lines(
      "memory profile",
      {{w.events_missing_stats, "allocator events without allocator_name or bytes_allocated (left out)"},
       {w.reused_live_addresses, "allocations at an address still live (its free was not recorded)"}});
}

std::string render_op_stats_warnings(const OpStatsResult& ops) {
  const OpStatsWarnings& w = ops.warnings;
  return warning_lines(
      "op stats",
      {{w.negative_durations, "events with a negative duration (left out)"},
       {w.malformed_op_stats, "events whose op stat is not name:Type (counted under the stat's text, type unknown)"},
       {w.device_events_with_op > 0 ? w.device_events_without_op : 0,
        "device events without an op stat (counted under their own name, type unknown)"}});
}

namespace {

// One side's rows of the table without idle.
void append_op_rows(const OpStatsResult& ops, bool device, size_t rows, std::string& out) {
  const auto& records = ops.db.without_idle().tf_stats_record();
  const int64_t self_ns = device ? ops.device_self_ns : ops.host_self_ns;
  const int64_t idle_ns = device ? ops.device_idle_ns : ops.host_idle_ns;
  const uint64_t cut = device ? ops.db.device_records_cut() : ops.db.host_records_cut();
  absl::StrAppendFormat(&out, "%s ops: %.3f ms of self time, %.3f ms idle", device ? "device" : "host",
                        static_cast<double>(self_ns) / 1e6, static_cast<double>(idle_ns) / 1e6);
  if (cut > 0) absl::StrAppendFormat(&out, " (%d more ops cut)", cut);
  absl::StrAppend(&out, "\n");
  absl::StrAppendFormat(&out, "%4s %-16s %8s %11s %11s %6s %6s %9s %9s %-7s  %s\n", "rank", "type", "count", "total_ms",
                        "self_ms", "self%", "cum%", "GFLOP/s", "GiB/s", "bound", "op");
  size_t shown = 0;
  for (const auto& r : records) {
    if ((r.host_or_device() == "Device") != device) continue;
    if (shown++ == rows) {
      absl::StrAppend(&out, "... more rows in framework_op_stats.json\n");
      break;
    }
    const double fraction = device ? r.device_total_self_time_as_fraction() : r.host_total_self_time_as_fraction();
    const double cumulative =
        device ? r.device_cumulative_total_self_time_as_fraction() : r.host_cumulative_total_self_time_as_fraction();
    absl::StrAppendFormat(&out, "%4d %-16s %8d %11.3f %11.3f %6.1f %6.1f %9.2f %9.2f %-7s  %s\n", r.rank(),
                          clipped(r.op_type(), 16), r.occurrences(), r.total_time_in_us() / 1e3,
                          r.total_self_time_in_us() / 1e3, 100 * fraction, 100 * cumulative, r.measured_flop_rate(),
                          r.measured_memory_bw(), r.bound_by(), clipped(r.op_name(), kNameWidth));
  }
}

}  // namespace

std::string render_op_stats_page(const OpStatsResult& ops, size_t rows) {
  std::string out =
      absl::StrFormat("framework op stats (%s)", ops.db.device_type().empty() ? "no device" : ops.db.device_type());
  if (ops.peak_flops_per_s > 0) {
    absl::StrAppendFormat(&out, ": device peak %.1f TFLOP/s, %.1f GB/s", ops.peak_flops_per_s / 1e12,
                          ops.peak_memory_bytes_per_s / 1e9);
  } else {
    absl::StrAppend(&out, ": device peak unknown (no capability stats), bound by unknown");
  }
  absl::StrAppend(&out, "\n");
  append_op_rows(ops, true, rows, out);
  append_op_rows(ops, false, rows, out);
  return out + render_op_stats_warnings(ops);
}

std::string render_kernel_stats_page(const KernelStatsResult& kernels, size_t rows) {
  const auto& db = kernels.db;
  std::string out =
      absl::StrFormat("kernel stats: %d launches, %.3f ms of kernel time, %d kernel rows", kernels.kernel_launches,
                      static_cast<double>(kernels.kernel_time_ns) / 1e6, db.reports_size());
  if (kernels.reports_cut > 0) absl::StrAppendFormat(&out, " (%d more cut)", kernels.reports_cut);
  if (kernels.launches_attributed_by_correlation > 0) {
    absl::StrAppendFormat(&out, "; %d launches took their op from the annotation around their CUDA launch",
                          kernels.launches_attributed_by_correlation);
  }
  absl::StrAppend(&out, "\n");
  if (db.reports_size() == 0) return out + render_kernel_stats_warnings(kernels);
  absl::StrAppendFormat(&out, "%4s %11s %7s %9s %5s %7s %11s %9s %5s %3s %3s  %s\n", "rank", "total_ms", "count",
                        "avg_us", "regs", "shmem", "grid", "block", "occ%", "TC", "el", "kernel / op");
  const size_t shown = std::min(rows, static_cast<size_t>(db.reports_size()));
  for (size_t i = 0; i < shown; ++i) {
    const auto& r = db.reports(static_cast<int>(i));
    const double avg_us = r.occurrences() ? static_cast<double>(r.total_duration_ns()) / r.occurrences() / 1e3 : 0;
    absl::StrAppendFormat(&out, "%4d %11.3f %7d %9.2f %5d %7d %11s %9s %5.1f %3s %3s  %s\n", i + 1,
                          static_cast<double>(r.total_duration_ns()) / 1e6, r.occurrences(), avg_us,
                          r.registers_per_thread(), r.static_shmem_bytes() + r.dynamic_shmem_bytes(),
                          dims(r.grid_dim()), dims(r.block_dim()), r.occupancy_pct(),
                          r.is_kernel_using_tensor_core() ? "yes" : "-", r.is_op_tensor_core_eligible() ? "yes" : "-",
                          clipped(r.name(), kNameWidth));
    if (!r.op_name().empty()) {
      absl::StrAppend(&out, std::string(88, ' '), "op ", clipped(r.op_name(), kNameWidth), "\n");
    }
  }
  if (shown < static_cast<size_t>(db.reports_size())) {
    absl::StrAppendFormat(&out, "... %d more rows in kernel_stats.json\n", db.reports_size() - shown);
  }
  absl::StrAppend(&out, "TC: the kernel's name suggests tensor cores; el: its op can use them\n");
  return out + render_kernel_stats_warnings(kernels);
}

std::string render_memory_profile_page(const MemoryProfileResult& memory, size_t rows) {
  const auto& profile = memory.profile;
  std::string out =
      absl::StrFormat("memory profile: %d allocators, %d allocator events", profile.memory_ids_size(), memory.events);
  if (memory.freed_from_before.frees > 0) {
    absl::StrAppendFormat(&out, "; %d frees of memory allocated before the window", memory.freed_from_before.frees);
    if (memory.freed_from_before.bytes > 0)
      absl::StrAppendFormat(&out, " (%.2f MiB)", mib(memory.freed_from_before.bytes));
    absl::StrAppend(&out, ", in the allocators' totals");
  }
  absl::StrAppend(&out, "\n");
  for (const std::string& id : profile.memory_ids()) {
    const auto& a = profile.memory_profile_per_allocator().at(id);
    const auto& s = a.profile_summary();
    const auto& peak = s.peak_stats();
    absl::StrAppendFormat(&out,
                          "%s: peak %.2f MiB in use (%.2f MiB heap, %.2f MiB stack) at %.3f ms, capacity %.2f MiB, "
                          "fragmentation %.2f",
                          id, mib(peak.peak_bytes_in_use()), mib(peak.heap_allocated_bytes()),
                          mib(peak.stack_reserved_bytes()), static_cast<double>(s.peak_stats_time_ps()) / 1e9,
                          mib(s.memory_capacity()), peak.fragmentation());
    if (s.peak_bytes_usage_lifetime() > 0) {
      absl::StrAppendFormat(&out, "; lifetime peak %.2f MiB", mib(s.peak_bytes_usage_lifetime()));
    }
    absl::StrAppend(&out, "\n");
    const size_t shown = std::min(rows, static_cast<size_t>(a.active_allocations_size()));
    for (size_t i = 0; i < shown; ++i) {
      const auto& row = a.active_allocations(static_cast<int>(i));
      const auto& m = row.snapshot_index() >= 0
                          ? a.memory_profile_snapshots(static_cast<int>(row.snapshot_index())).activity_metadata()
                          : a.special_allocations(static_cast<int>(row.special_index()));
      absl::StrAppendFormat(&out, "  %10.3f MiB x%-4d %-10s %-8s %-14s %s\n", mib(m.allocation_bytes()),
                            row.num_occurrences(), m.region_type().empty() ? "-" : m.region_type(),
                            m.data_type().empty() ? "-" : m.data_type(),
                            m.tensor_shape().empty() ? "-" : clipped(m.tensor_shape(), 14),
                            m.tf_op_name().empty() ? "(no op)" : clipped(m.tf_op_name(), kNameWidth));
    }
    if (shown < static_cast<size_t>(a.active_allocations_size())) {
      absl::StrAppendFormat(&out, "  ... %d more rows in memory_profile.json\n", a.active_allocations_size() - shown);
    }
  }
  return out + render_memory_profile_warnings(memory);
}

absl::StatusOr<std::string> render_memory_profile_json(const tensorflow::profiler::MemoryProfile& profile) {
  tensorflow::profiler::MemoryProfile outer = profile;
  outer.clear_memory_profile_per_allocator();
  auto json = message_to_json(outer, false);
  if (!json.ok()) return json.status();
  // The allocators in memory_ids order (the order the page lists them in), not the map's key order.
  JsonWriter per_allocator(/*indented=*/false);
  per_allocator.begin_object();
  per_allocator.key("memoryProfilePerAllocator");
  per_allocator.begin_object();
  for (const std::string& id : profile.memory_ids()) {
    auto it = profile.memory_profile_per_allocator().find(id);
    if (it == profile.memory_profile_per_allocator().end()) continue;
    per_allocator.key(id);
    if (absl::Status s = write_message_json(it->second, per_allocator); !s.ok()) return s;
  }
  per_allocator.end_object();
  per_allocator.end_object();
  std::string member = std::move(per_allocator).take();
  const std::string allocators = member.substr(1, member.size() - 2);  // the member, without the braces around it
  constexpr std::string_view kEmptyMap = "\"memoryProfilePerAllocator\":{}";
  if (const size_t at = json->find(kEmptyMap); at != std::string::npos) {
    json->replace(at, kEmptyMap.size(), allocators);
  } else {
    json->insert(1, allocators + (json->size() > 2 ? "," : ""));
  }
  return json;
}

}  // namespace podscope::analysis
