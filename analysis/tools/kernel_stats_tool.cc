// GPU kernel stats (kernel_stats.h): reads GPU stream lines, CUPTI's host plane and annotated op lines; a host's part
// is its kernel rows by key (kernels take their ops from their own file's launches) and counts; its tab shows the
// kernels with the most time.
#include "analysis/rendering/json_writer.h"
#include "analysis/tools/kernel_stats.h"
#include "analysis/tools/tool_pages.h"
#include "analysis/tools/tool.h"

namespace podscope::analysis {
namespace {

// What the tab draws: the kernels with the most time.
constexpr int kTabKernels = 200;

class KernelStatsToolResult final : public ToolValue<KernelStatsResult> {
 public:
  using ToolValue::ToolValue;
  std::vector<ToolFile> files(const AnalysisOutcome&) const override {
    return message_files("kernel_stats", value.db, false);
  }
  std::string page(const AnalysisOutcome&) const override { return render_kernel_stats_page(value); }
  absl::StatusOr<std::string> tab_json(const AnalysisOutcome&) const override {
    tensorflow::profiler::KernelStatsDb shown;
    for (int i = 0; i < value.db.reports_size() && i < kTabKernels; ++i) *shown.add_reports() = value.db.reports(i);
    return tab_json_of(shown);
  }
  std::string warnings() const override { return render_kernel_stats_warnings(value); }
};

// Every host's rows folded together, the longest kept.
std::unique_ptr<ToolResult> finish(const ToolInput& input, AnalysisOutcome&) {
  KernelStatsBuilder builder;
  return std::make_unique<KernelStatsToolResult>(
      std::move(add_parts<podscope::v1::KernelStatsPart>(input, builder)).finish());
}

}  // namespace

ToolParts kernel_stats_tool() {
  return {&KernelStatsBuilder::wants_line, &make_part_builder<HostPartOf<KernelStatsBuilder>>, &finish};
}

}  // namespace podscope::analysis
