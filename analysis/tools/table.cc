// The tool table: one row per tool, in the order of the report's tabs (and of the warnings in the pod summary). A tool
// is its own file beside this one, which declares what it reads and how it finishes (tool.h), its tab's body and
// drawing (<name>.html, <name>.js), and its row here.
#include "analysis/tools/tool.h"

namespace podscope::analysis {

ToolParts overview_tool();
ToolParts input_pipeline_tool();
ToolParts tf_data_tool();
ToolParts pod_tool();
ToolParts trace_analysis_tool();
ToolParts kernel_stats_tool();
ToolParts memory_tool();
ToolParts op_stats_tool();

std::span<const Tool> analysis_tools() {
  static const Tool kTools[] = {
      {"overview", "", "overview", "Overview", "overview", overview_tool()},
      {"input_pipeline", "", "input", "Input pipeline", "inputPipeline", input_pipeline_tool()},
      {"tf_data", "tf.data bottlenecks", "tfdata", "tf.data", "tfData", tf_data_tool()},
      {"pod", "the pod summary", "pod", "Pod viewer", "pod", pod_tool()},
      {"trace_analysis", "Holistic Trace Analysis' views of each rank", "trace", "Trace analysis", "traceAnalysis",
       trace_analysis_tool()},
      {"kernel_stats", "GPU kernels", "kernels", "Kernel stats", "kernelStats", kernel_stats_tool()},
      {"memory", "the memory profile", "memory", "Memory", "memoryProfile", memory_tool()},
      {"op_stats", "framework ops", "opstats", "Op stats", "opStats", op_stats_tool()},
  };
  return kTools;
}

}  // namespace podscope::analysis
