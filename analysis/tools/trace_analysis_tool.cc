// The trace analysis (trace_analysis.proto): what Holistic Trace Analysis shows of each rank, read from each core's
// activity in the pod's step database; its tab shows the temporal breakdown and overlap per rank, each stream's idle
// time by cause and the launches.
#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"
#include "analysis/pod/pod_analyzer.h"
#include "analysis/tools/tool.h"
#include "podscope/v1/trace_analysis.pb.h"

namespace podscope::analysis {
namespace {

using podscope::v1::RankTraceAnalysis;
using podscope::v1::TraceAnalysis;

std::string_view kind_name(podscope::v1::CoreKind kind) {
  switch (kind) {
    case podscope::v1::CORE_KIND_GPU: return "GPU";
    case podscope::v1::CORE_KIND_TPU: return "TPU";
    case podscope::v1::CORE_KIND_HOST: return "CPU";
    default: return "CUSTOM";
  }
}

double percent(double part, double whole) { return whole > 0 ? 100 * part / whole : 0; }

RankTraceAnalysis rank_of(const PodCore& core, uint32_t core_id) {
  const podscope::v1::CoreActivity& a = core.core->activity();
  RankTraceAnalysis r;
  r.set_core_id(core_id);
  r.set_host_name(core.host_name);
  r.set_plane_name(core.core->plane_name());
  r.set_kind(std::string(kind_name(core.core->kind())));
  const double span = static_cast<double>(a.last_ns() - a.first_ns());
  const double idle = span - static_cast<double>(a.busy_ns());
  const double compute = static_cast<double>(a.compute_ns());
  const double non_compute = static_cast<double>(a.busy_ns() - a.compute_ns());
  r.set_span_us(span / 1e3);
  r.set_idle_us(idle / 1e3);
  r.set_compute_us(compute / 1e3);
  r.set_non_compute_us(non_compute / 1e3);
  r.set_idle_percent(percent(idle, span));
  r.set_compute_percent(percent(compute, span));
  r.set_non_compute_percent(percent(non_compute, span));
  r.set_communication_us(static_cast<double>(a.communication_ns()) / 1e3);
  if (a.communication_ns() > 0) {
    r.set_overlap_percent(percent(static_cast<double>(a.overlap_ns()), static_cast<double>(a.communication_ns())));
  }
  *r.mutable_streams() = a.streams();
  *r.mutable_launches() = a.launches();
  return r;
}

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

std::string render_page(const TraceAnalysis& t) {
  std::string out = "trace analysis (Holistic Trace Analysis' views of each rank, over all of its events)\n";
  if (t.ranks().empty()) return out + "no core has events\n";
  absl::StrAppend(&out,
                  "  core  kind    span ms   idle %  compute %  non-compute %  communication ms  overlap %  host\n");
  for (const auto& r : t.ranks()) {
    absl::StrAppendFormat(&out, "  %4u  %-6s %8.3f %8.2f %10.2f %14.2f %17.3f %10s  %s\n", r.core_id(), r.kind(),
                          r.span_us() / 1e3, r.idle_percent(), r.compute_percent(), r.non_compute_percent(),
                          r.communication_us() / 1e3,
                          r.has_overlap_percent() ? absl::StrFormat("%.2f", r.overlap_percent()) : "-", r.host_name());
  }
  bool streams = false;
  for (const auto& r : t.ranks()) {
    for (const auto& s : r.streams()) {
      if (!streams) {
        absl::StrAppend(
            &out, "\nidle time by stream (between each event and the one before it):\n",
            "  core  stream                         events   idle ms  host wait %  kernel wait %  other %\n");
        streams = true;
      }
      const int64_t idle = s.host_wait_ns() + s.kernel_wait_ns() + s.other_ns();
      absl::StrAppendFormat(&out, "  %4u  %-30.30s %7u %9.3f %12.2f %14.2f %8.2f\n", r.core_id(), s.name(), s.events(),
                            ms(idle), percent(static_cast<double>(s.host_wait_ns()), static_cast<double>(idle)),
                            percent(static_cast<double>(s.kernel_wait_ns()), static_cast<double>(idle)),
                            percent(static_cast<double>(s.other_ns()), static_cast<double>(idle)));
    }
  }
  bool launches = false;
  for (const auto& r : t.ranks()) {
    const auto& l = r.launches();
    if (l.launches() == 0) continue;
    if (!launches) {
      absl::StrAppend(&out, "\nlaunches (each kernel, copy or memset and the runtime call that launched it):\n");
      launches = true;
    }
    absl::StrAppendFormat(&out,
                          "  core %u: %u launches; delay p50 %.1f us, p95 %.1f us, max %.1f us, %u over 100 us; calls "
                          "%.1f us on average, %u over 50 us; %u events shorter than their call (%.3f ms)\n",
                          r.core_id(), l.launches(), l.delay_p50_ns() / 1e3, l.delay_p95_ns() / 1e3,
                          l.delay_max_ns() / 1e3, l.delayed_launches(),
                          static_cast<double>(l.call_total_ns()) / static_cast<double>(l.launches()) / 1e3,
                          l.long_calls(), l.short_events(), ms(l.short_event_ns()));
  }
  return out;
}

std::unique_ptr<ToolResult> finish(const ToolInput& input, AnalysisOutcome&) {
  std::map<uint32_t, RankTraceAnalysis> ranks;
  for (const PodCore& core : input.pod.cores) {
    const auto& a = core.core->activity();
    if (a.last_ns() <= a.first_ns()) continue;
    const uint32_t id = pod_core_id(core).core_id;
    ranks.try_emplace(id, rank_of(core, id));  // a second plane claiming a taken id is left out, as in the pod view
  }
  TraceAnalysis result;
  for (auto& [id, rank] : ranks) *result.add_ranks() = std::move(rank);
  return std::make_unique<MessageResult<TraceAnalysis>>(std::move(result), "trace_analysis", false, &render_page);
}

}  // namespace

ToolParts trace_analysis_tool() { return {.finish = &finish}; }

}  // namespace podscope::analysis
