// Every tool of the analysis, declared once in kTools (tools.cc): its name (`podscope analyze RUN --tool NAME`),
// what it reads, how its result is finished, its terminal page, the files it writes into the run directory and its
// tab of report.html. The runner feeds and finishes the tools, writes their files and the report's tabs from this
// table, and the CLI's --tool list and pages come from it too: a new tool is one row here.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/plane_walk.h"
#include "analysis/renderers.h"
#include "analysis/runner/analysis_runner.h"
#include "proto/xspace/xspace_stream_reader.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

// What a tool reads.
enum class ToolInput {
  kPodAnalysis,  // the pod analyzer's result
  kStepModel,    // the step model: every core's steps and where their time went
  kPlanes,       // the planes themselves, as they stream past, through a builder of its own
};

// The builder of a tool that reads the planes itself (ToolInput::kPlanes): it reads every plane with a line it
// wants, in file order, in walks shared with the other tools (plane_walk.h), is told when each file ends, and
// finishes its result into the outcome once every file passed.
class PlaneToolBuilder : public PlaneConsumer {
 public:
  // The file's names (the XSpace's `hostnames` and the file's stem, which name its host when its planes do not).
  virtual void end_file(size_t file_index, const std::vector<std::string>& hostnames, std::string_view file_stem) = 0;
  virtual void finish(AnalysisOutcome& outcome) && = 0;
};

// One file a tool writes into the run directory.
struct ToolFile {
  std::string name;
  absl::StatusOr<std::string> content;
};

struct Tool {
  std::string_view name;         // `podscope analyze RUN --tool NAME`
  std::string_view description;  // for --tool's help; empty: the name says it
  ToolInput reads;
  // For ToolInput::kPlanes: the lines it reads (by plane and line name) and its builder; null otherwise (the step
  // model gives the overview and the input pipeline together, the pod analyzer the pod's result).
  bool (*wants_line)(std::string_view plane_name, std::string_view line_name);
  std::unique_ptr<PlaneToolBuilder> (*builder)();
  std::string (*page)(const AnalysisOutcome& outcome);             // its terminal page
  std::vector<ToolFile> (*files)(const AnalysisOutcome& outcome);  // written into the run directory, in this order
  // Its report.html tab (the section "tab-<id>", drawn by the page's code for that id) and what the tab shows.
  std::string_view tab_id;
  std::string_view tab_title;
  const google::protobuf::Message& (*result)(const AnalysisOutcome& outcome);
};

// Every tool, in the order of the report's tabs.
std::span<const Tool> analysis_tools();
// The tool named `name`, or null.
const Tool* find_tool(std::string_view name);

// The terminal page without --tool: the overview's page, then the pod summary.
std::string default_page(const AnalysisOutcome& outcome);
// report.html's tabs, one per tool, in table order.
std::vector<ReportTab> report_tabs(const AnalysisOutcome& outcome);

}  // namespace podscope::analysis
