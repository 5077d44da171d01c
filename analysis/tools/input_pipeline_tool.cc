// The input pipeline analyzer (input_pipeline.h): reads the pod's steps.
#include "analysis/tools/input_pipeline.h"
#include "analysis/tools/tool.h"

namespace podscope::analysis {
namespace {

std::unique_ptr<ToolResult> finish(const ToolInput& input, AnalysisOutcome&) {
  return std::make_unique<MessageResult<tensorflow::profiler::InputPipelineAnalysisResult>>(
      pod_steps_to_input_pipeline(input.pod), "input_pipeline", true, &render_input_pipeline_text);
}

}  // namespace

ToolParts input_pipeline_tool() { return {.finish = &finish}; }

}  // namespace podscope::analysis
