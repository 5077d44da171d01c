#include "analysis/tools/tool.h"

#include "analysis/rendering/json_writer.h"
#include "analysis/rendering/renderers.h"

namespace podscope::analysis {

std::vector<ToolFile> message_files(std::string_view stem, const google::protobuf::Message& result, bool indented) {
  std::vector<ToolFile> files;
  files.push_back({std::string(stem) + ".pb", xspace::serialize_deterministically(result)});
  files.push_back({std::string(stem) + ".json", message_to_json(result, indented)});
  return files;
}

absl::StatusOr<std::string> tab_json_of(const google::protobuf::Message& shown) {
  return message_to_json(shown, /*indented=*/false);
}

const Tool* find_tool(std::string_view name) {
  for (const Tool& tool : analysis_tools())
    if (tool.name == name) return &tool;
  return nullptr;
}

const ToolResult* tool_result(const AnalysisOutcome& outcome, std::string_view name) {
  const std::span<const Tool> tools = analysis_tools();
  for (size_t i = 0; i < tools.size() && i < outcome.results.size(); ++i)
    if (tools[i].name == name) return outcome.results[i].get();
  return nullptr;
}

std::string tool_page(const AnalysisOutcome& outcome, std::string_view name) {
  if (const ToolResult* result = tool_result(outcome, name)) return result->page(outcome);
  const ToolResult* overview = tool_result(outcome, "overview");
  const ToolResult* pod = tool_result(outcome, "pod");
  return (overview ? overview->page(outcome) : "") + "\n" + (pod ? pod->page(outcome) : "");
}

HostAnalysisBuilder::HostAnalysisBuilder() : steps_(std::make_unique<HostStepDatabaseBuilder>()) {
  for (const Tool& tool : analysis_tools()) parts_.push_back(tool.parts.host_part ? tool.parts.host_part() : nullptr);
}

HostAnalysisBuilder::~HostAnalysisBuilder() = default;

bool HostAnalysisBuilder::wants_line(std::string_view plane_name, std::string_view line_name) {
  if (HostStepDatabaseBuilder::wants_line(plane_name, line_name)) return true;
  for (const Tool& tool : analysis_tools())
    if (tool.parts.wants_line && tool.parts.wants_line(plane_name, line_name)) return true;
  return false;
}

void HostAnalysisBuilder::read_plane(const tensorflow::profiler::XPlane& plane) {
  const xspace::XPlaneReader reader(plane);
  std::vector<PlaneConsumer*> consumers = {steps_.get()};
  for (auto& part : parts_)
    if (part) consumers.push_back(part.get());
  std::vector<PlaneEventReader*> readers;
  for (PlaneConsumer* consumer : consumers) consumer->begin_plane(0, reader, readers);
  walk_plane(reader, readers);
  for (PlaneConsumer* consumer : consumers) consumer->end_plane(0);
}

absl::StatusOr<podscope::v1::HostAnalysis> HostAnalysisBuilder::finish(const std::vector<std::string>& hostnames,
                                                                       std::string_view file_stem) && {
  podscope::v1::HostAnalysis host;
  *host.mutable_steps() = std::move(*steps_).finish(hostnames, file_stem);
  const std::span<const Tool> tools = analysis_tools();
  for (size_t i = 0; i < tools.size(); ++i) {
    if (!parts_[i]) continue;
    absl::StatusOr<std::string> part = std::move(*parts_[i]).finish(host.steps());
    if (!part.ok()) return part.status();
    (*host.mutable_tool_parts())[std::string(tools[i].name)] = *std::move(part);
  }
  return host;
}

AnalysisOutcome merge_host_analyses(std::vector<podscope::v1::HostAnalysis> hosts, const PodAnalyzerOptions& options) {
  AnalysisOutcome outcome;
  for (auto& host : hosts) outcome.step_databases.push_back(std::move(*host.mutable_steps()));
  const PodSteps pod = merge_step_databases(outcome.step_databases);
  for (const Tool& tool : analysis_tools()) {
    static const std::string kNone;
    std::vector<const std::string*> parts;
    for (const auto& host : hosts) {
      const auto it = host.tool_parts().find(std::string(tool.name));
      parts.push_back(it == host.tool_parts().end() ? &kNone : &it->second);
    }
    outcome.results.push_back(tool.parts.finish({.pod = pod, .parts = parts, .options = options}, outcome));
  }
  outcome.summary_text = render_summary_text(outcome.analysis);
  for (const auto& result : outcome.results) outcome.summary_text += result->warnings();
  std::vector<tensorflow::profiler::RankedAdvice> advice;
  for (const auto& result : outcome.results) {
    for (auto& a : result->advice(outcome)) advice.push_back(std::move(a));
  }
  outcome.advice = rank_advice(std::move(advice));
  for (const auto& result : outcome.results) result->take_ranked_advice(outcome.advice, outcome);
  return outcome;
}

std::vector<tensorflow::profiler::RankedAdvice> rank_advice(std::vector<tensorflow::profiler::RankedAdvice> advice) {
  std::stable_sort(advice.begin(), advice.end(), [](const auto& a, const auto& b) {
    const bool a_cost = a.level() != "potential";
    const bool b_cost = b.level() != "potential";
    if (a_cost != b_cost) return a_cost;
    return a.step_percent() > b.step_percent();
  });
  return advice;
}

absl::StatusOr<std::vector<ReportTab>> report_tabs(const AnalysisOutcome& outcome) {
  std::vector<ReportTab> tabs;
  const std::span<const Tool> tools = analysis_tools();
  for (size_t i = 0; i < tools.size() && i < outcome.results.size(); ++i) {
    const Tool& tool = tools[i];
    absl::StatusOr<std::string> json = outcome.results[i]->tab_json(outcome);
    if (!json.ok()) return json.status();
    tabs.push_back({tool.tab_id, tool.tab_title, tool_tab_file(std::string(tool.name) + ".html"),
                    tool_tab_file(std::string(tool.name) + ".js"), tool.data_key, *std::move(json)});
  }
  return tabs;
}

}  // namespace podscope::analysis
