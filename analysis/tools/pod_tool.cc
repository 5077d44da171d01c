// The pod viewer (pod_analyzer.h): reads the pod's steps; its analysis is the outcome's, which the capture keeps, and
// its page is the pod summary (with every tool's warnings).
#include "analysis/rendering/json_writer.h"
#include "analysis/rendering/renderers.h"
#include "analysis/tools/tool.h"

namespace podscope::analysis {
namespace {

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
};

std::unique_ptr<ToolResult> finish(const ToolInput& input, AnalysisOutcome& outcome) {
  outcome.analysis = analyze_pod_steps(input.pod, input.options);
  return std::make_unique<PodResult>();
}

}  // namespace

ToolParts pod_tool() { return {.finish = &finish}; }

}  // namespace podscope::analysis
