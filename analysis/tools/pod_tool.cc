// The pod viewer (pod_analyzer.h): reads the pod's steps; its analysis is the outcome's, which the capture keeps, and
// its page is the pod summary (with every tool's warnings). It advises on stragglers and on the collectives' time.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/pod/step_category.h"
#include "analysis/rendering/json_writer.h"
#include "analysis/rendering/renderers.h"
#include "analysis/tools/input_pipeline.h"
#include "analysis/tools/overview_page.h"
#include "analysis/tools/tool.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::RankedAdvice;

// Every core's steps summed: the pod's time, and of it all-reduce sync and compute (µs).
struct PodTime {
  double total_us = 0;
  double sync_us = 0;
  double collective_compute_us = 0;
  double step_us = 0;  // the mean step of a core
};

PodTime pod_time(const podscope::v1::PodAnalysis& analysis) {
  PodTime t;
  uint64_t steps = 0;
  auto category_us = [](const podscope::v1::CoreSummary& core, StepCategory c) {
    const auto it = core.average_breakdown_us().find(static_cast<int>(c));
    return it == core.average_breakdown_us().end() ? 0.0 : it->second;
  };
  for (const auto& core : analysis.cores()) {
    const double n = core.step_count();
    steps += core.step_count();
    t.total_us += core.average_step_us() * n;
    t.sync_us += category_us(core, StepCategory::kAllReduceSync) * n;
    t.collective_compute_us += category_us(core, StepCategory::kAllReduceCompute) * n;
  }
  if (steps > 0) t.step_us = t.total_us / static_cast<double>(steps);
  return t;
}

std::string_view straggler_action(std::string_view reason) {
  if (reason == "compute")
    return "give it less work or find why it computes slower (a slower or throttled device, other processes on its "
           "host, uneven batches); the trace of one step (`podscope analyze RUN --trace-window step:N`) shows it "
           "beside the others";
  if (reason == "input")
    return "its input is slower than the others': see its host in `podscope analyze RUN --tool input_pipeline`";
  if (reason == "host work")
    return "its host does more per step (Python, launches, compilation): compare its trace with the others' "
           "(`podscope analyze RUN --trace-window step:N`)";
  return "compare its trace with the others' (`podscope analyze RUN --trace-window step:N`) to see what it does "
         "while they wait";
}

// Advice on `share` % of the pod's time: as many milliseconds of each step.
RankedAdvice advice_of(std::string_view kind, double share, const PodTime& t, std::string statement,
                       std::string_view action) {
  return make_advice(kind, share, t.step_us * share / 100 / 1e3, std::move(statement), action);
}

// What a straggler's host did that the others' did not, where the input pipeline analyzer says: its slowest input
// stage, for a straggler whose input stood out.
std::string input_of(const podscope::v1::Straggler& s, const AnalysisOutcome& outcome) {
  if (s.reason() != "input") return "";
  const ToolResult* input = tool_result(outcome, "input_pipeline");
  const auto* pipeline = dynamic_cast<const ToolValue<tensorflow::profiler::InputPipelineAnalysisResult>*>(input);
  if (pipeline == nullptr) return "";
  for (const auto& host : pipeline->value.hosts()) {
    if (host.host_name() != s.host_name() || host.slowest_stage().empty()) continue;
    return absl::StrFormat(
        " Its host waits for input %.1f %% of its step time (%s input-bound); its slowest input stage is "
        "%s (%.3f ms self time in the window).",
        host.input_percent(), host.verdict(), host.slowest_stage(), host.slowest_stage_self_time_ms());
  }
  return "";
}

// A straggler costs the pod the wait it causes the others; the collectives cost the rest of their time.
std::vector<RankedAdvice> pod_advice(const AnalysisOutcome& outcome) {
  const podscope::v1::PodAnalysis& analysis = outcome.analysis;
  std::vector<RankedAdvice> advice;
  const PodTime t = pod_time(analysis);
  if (t.total_us <= 0) return advice;
  double caused_us = 0;
  for (const auto& s : analysis.stragglers()) {
    const double cost_us = s.mean_cost_to_others_us() * s.straggling_steps();
    caused_us += cost_us;
    const double share = 100 * cost_us / t.total_us;
    if (share < 3) continue;
    advice.push_back(advice_of(
        "straggler", share, t,
        absl::StrFormat(
            "Core %u (%s) is a straggler: %s waited for it in %u of %u steps, %.3f ms per step (%s); "
            "%.3f ms of all-reduce sync per step in all, %.1f %% of the pod's time.",
            s.core_id(), s.host_name(),
            s.waiting_cores() == 1 ? "the other core" : absl::StrCat("the other ", s.waiting_cores(), " cores"),
            s.straggling_steps(), s.compared_steps(), s.mean_excess_us() / 1e3, straggler_reason_text(s),
            s.mean_cost_to_others_us() / 1e3, share) +
            input_of(s, outcome),
        straggler_action(s.reason())));
  }
  const double collectives_us = t.sync_us - caused_us + t.collective_compute_us;
  const double share = 100 * collectives_us / t.total_us;
  if (share >= 3) {
    advice.push_back(advice_of(
        "collectives", share, t,
        absl::StrFormat("%.1f %% of the pod's time is in collectives%s: AllReduce sync %.1f %%, AllReduce compute "
                        "%.1f %%.",
                        share, caused_us > 0 ? " beyond the stragglers' wait" : "",
                        std::max(0.0, 100 * (t.sync_us - caused_us) / t.total_us),
                        100 * t.collective_compute_us / t.total_us),
        "overlap them with compute (DDP's gradient buckets, asynchronous collectives) or exchange less (larger "
        "batches per step, compressed gradients); `podscope analyze RUN --tool pod` shows each step's sync"));
  }
  return advice;
}

class PodResult final : public ToolResult {
 public:
  std::vector<ToolFile> files(const AnalysisOutcome& o) const override {
    std::vector<ToolFile> files;
    files.push_back({"pod_viewer.json", render_pod_viewer_json(o.analysis)});
    files.push_back({"pod_viewer.pb", xspace::serialize_deterministically(o.analysis.pod_viewer())});
    files.push_back({"pod_viewer.pb.json", render_pod_viewer_proto_json(o.analysis)});
    files.push_back({"pod_analysis.pb", xspace::serialize_deterministically(o.analysis)});
    files.push_back({"pod_summary.txt", o.summary_text});
    return files;
  }
  std::string page(const AnalysisOutcome& o) const override { return o.summary_text; }
  absl::StatusOr<std::string> tab_json(const AnalysisOutcome& o) const override { return tab_json_of(o.analysis); }
  std::vector<RankedAdvice> advice(const AnalysisOutcome& o) const override { return pod_advice(o); }
};

std::unique_ptr<ToolResult> finish(const ToolInput& input, AnalysisOutcome& outcome) {
  outcome.analysis = analyze_pod_steps(input.pod, input.options);
  return std::make_unique<PodResult>();
}

}  // namespace

ToolParts pod_tool() { return {.finish = &finish}; }

}  // namespace podscope::analysis
