// The overview page (overview_page.h): reads the pod's steps; its result embeds the input pipeline analyzer's, gives
// its advice (input, kernel launch, unexplained time, precision) and shows the run's advice ranked, which is the
// recommendation the capture prints after the pod summary.
#include "analysis/tools/input_pipeline.h"
#include "analysis/tools/overview_page.h"
#include "analysis/tools/tool.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::OverviewPage;
using tensorflow::profiler::RankedAdvice;

class OverviewResult final : public ToolValue<OverviewPage> {
 public:
  explicit OverviewResult(OverviewPage page) : ToolValue<OverviewPage>(std::move(page)) {}
  std::vector<ToolFile> files(const AnalysisOutcome&) const override {
    return message_files("overview_page", value, true);
  }
  std::string page(const AnalysisOutcome&) const override { return render_overview_text(value); }
  absl::StatusOr<std::string> tab_json(const AnalysisOutcome&) const override { return tab_json_of(value); }
  std::vector<RankedAdvice> advice(const AnalysisOutcome&) const override { return overview_advice(value); }
  void take_ranked_advice(const std::vector<RankedAdvice>& ranked, AnalysisOutcome& outcome) override {
    show_ranked_advice(ranked, value);
    outcome.recommendation_text = render_overview_recommendation_text(value);
  }
};

std::unique_ptr<ToolResult> finish(const ToolInput& input, AnalysisOutcome& outcome) {
  auto result =
      std::make_unique<OverviewResult>(pod_steps_to_overview_page(input.pod, pod_steps_to_input_pipeline(input.pod)));
  outcome.recommendation_text = render_overview_recommendation_text(result->value);
  return result;
}

}  // namespace

ToolParts overview_tool() { return {.finish = &finish}; }

}  // namespace podscope::analysis
