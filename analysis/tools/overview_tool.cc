// The overview page (overview_page.h): reads the pod's steps; its result embeds the input pipeline analyzer's and
// gives the recommendation the capture prints after the pod summary.
#include "analysis/tools/input_pipeline.h"
#include "analysis/tools/overview_page.h"
#include "analysis/tools/tool.h"

namespace podscope::analysis {
namespace {

std::unique_ptr<ToolResult> finish(const ToolInput& input, AnalysisOutcome& outcome) {
  auto result = std::make_unique<MessageResult<tensorflow::profiler::OverviewPage>>(
      pod_steps_to_overview_page(input.pod, pod_steps_to_input_pipeline(input.pod)), "overview_page", true,
      &render_overview_text);
  outcome.recommendation_text = render_overview_recommendation_text(result->value);
  return result;
}

}  // namespace

ToolParts overview_tool() { return {.finish = &finish}; }

}  // namespace podscope::analysis
