// Framework op stats (op_stats.h): reads the host plane and device op lines; a host's part is its ops' totals, its
// planes' sums, its counts and its device's peaks; its tab shows each side's ops with the most self time and the idle
// rows.
#include "analysis/rendering/json_writer.h"
#include "analysis/tools/op_stats.h"
#include "analysis/rendering/renderers.h"
#include "analysis/tools/tool_pages.h"
#include "analysis/tools/tool.h"

namespace podscope::analysis {
namespace {

// What the tab draws: per side, the ops with the most self time.
constexpr int kTabOpsPerSide = 200;

// The rows without idle, the first of each side, and the idle rows of the table with idle.
tensorflow::profiler::TfStatsDatabase tab_rows(const tensorflow::profiler::TfStatsDatabase& db) {
  tensorflow::profiler::TfStatsDatabase out;
  out.set_device_type(db.device_type());
  out.set_device_records_cut(db.device_records_cut());
  out.set_host_records_cut(db.host_records_cut());
  int device_rows = 0, host_rows = 0;
  for (const auto& r : db.without_idle().tf_stats_record()) {
    int& rows = r.host_or_device() == "Host" ? host_rows : device_rows;
    if (rows++ < kTabOpsPerSide) *out.mutable_without_idle()->add_tf_stats_record() = r;
  }
  for (const auto& r : db.with_idle().tf_stats_record()) {
    if (r.op_name() == kIdleOpName) *out.mutable_with_idle()->add_tf_stats_record() = r;
  }
  return out;
}

class OpStatsToolResult final : public ToolValue<OpStatsResult> {
 public:
  using ToolValue::ToolValue;
  std::vector<ToolFile> files(const AnalysisOutcome&) const override {
    return message_files("framework_op_stats", value.db, false);
  }
  std::string page(const AnalysisOutcome&) const override { return render_op_stats_page(value); }
  absl::StatusOr<std::string> tab_json(const AnalysisOutcome&) const override {
    return tab_json_of(tab_rows(value.db));
  }
  std::string warnings() const override { return render_op_stats_warnings(value); }
};

// Every host's ops summed, ranked, the most self time kept.
std::unique_ptr<ToolResult> finish(const ToolInput& input, AnalysisOutcome&) {
  OpStatsBuilder builder;
  return std::make_unique<OpStatsToolResult>(std::move(add_parts<podscope::v1::OpStatsPart>(input, builder)).finish());
}

}  // namespace

ToolParts op_stats_tool() {
  return {&OpStatsBuilder::wants_line, &make_part_builder<HostPartOf<OpStatsBuilder>>, &finish};
}

}  // namespace podscope::analysis
