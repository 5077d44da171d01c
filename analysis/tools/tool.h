// A tool of the analysis is one file here and one row of the tool table (table.cc). Its file declares what it reads
// (the pod's steps, which every tool is handed, and, if it reads the planes, the lines it wants and the builder of
// its part of a host), how it finishes its result from the hosts' parts, and what is made of the result: its files,
// its terminal page, its report.html tab's data and its warnings for the pod summary; its tab's body and drawing are
// <name>.html and <name>.js beside it, embedded at build time. Its row gives its name, its --tool help and its tab's
// title. The runner reads each host's file once for the step database and every tool's part (HostAnalysisBuilder),
// merges the hosts (merge_host_analyses) and writes the tools' files and tabs in table order; the CLI's --tool list
// and pages come from the same rows. See docs/analysis.md.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/steps/plane_walk.h"
#include "analysis/pod/pod_analyzer.h"
#include "analysis/steps/pod_steps.h"
#include "analysis/rendering/renderers.h"
#include "google/protobuf/message.h"
#include "analysis/steps/step_database.h"
#include "podscope/v1/host_analysis.pb.h"
#include "podscope/v1/pod_analysis.pb.h"
#include "podscope/v1/step_database.pb.h"
#include "proto/xspace/serialize.h"
#include "tensorflow/overview_page.pb.h"

namespace podscope::analysis {

struct AnalysisOutcome;

// One file a tool writes into the run directory.
struct ToolFile {
  std::string name;
  absl::StatusOr<std::string> content;
};

// A tool's result and what is made of it. `outcome` is the whole analysis (the pod summary and the pod's analysis,
// which the pod tool's files hold).
class ToolResult {
 public:
  virtual ~ToolResult() = default;
  // Written into the run directory, in this order.
  virtual std::vector<ToolFile> files(const AnalysisOutcome& outcome) const = 0;
  // Its terminal page.
  virtual std::string page(const AnalysisOutcome& outcome) const = 0;
  // What its report.html tab shows, as the page's data (protobuf's JSON form).
  virtual absl::StatusOr<std::string> tab_json(const AnalysisOutcome& outcome) const = 0;
  // What it counted that the pod summary warns of, a line each ("" when nothing).
  virtual std::string warnings() const { return ""; }
  // What it advises, each with the figure behind it and what it costs; the run's advice is every tool's, ranked by
  // what each costs (rank_advice).
  virtual std::vector<tensorflow::profiler::RankedAdvice> advice(const AnalysisOutcome&) const { return {}; }
  // The run's advice, ranked, for the tool that shows it (the overview leads with it and gives the capture's
  // recommendation text).
  virtual void take_ranked_advice(const std::vector<tensorflow::profiler::RankedAdvice>&, AnalysisOutcome&) {}
};

// A result that holds a value: AnalysisOutcome::result<Value>() finds it.
template <typename Value>
class ToolValue : public ToolResult {
 public:
  explicit ToolValue(Value v) : value(std::move(v)) {}
  Value value;
};

// A tool's result as <stem>.pb (its message, serialized deterministically) and <stem>.json (every field, zeros
// included, as XProf prints its tools' JSON; indented where `indented`).
std::vector<ToolFile> message_files(std::string_view stem, const google::protobuf::Message& result, bool indented);
absl::StatusOr<std::string> tab_json_of(const google::protobuf::Message& shown);

// A result that is one message: its files are the message's (message_files), its tab shows it whole, its page is
// `page` of it.
template <typename Message>
class MessageResult final : public ToolValue<Message> {
 public:
  MessageResult(Message message, std::string_view stem, bool indented, std::string (*page)(const Message&))
      : ToolValue<Message>(std::move(message)), stem_(stem), indented_(indented), page_(page) {}
  std::vector<ToolFile> files(const AnalysisOutcome&) const override {
    return message_files(stem_, this->value, indented_);
  }
  std::string page(const AnalysisOutcome&) const override { return page_(this->value); }
  absl::StatusOr<std::string> tab_json(const AnalysisOutcome&) const override { return tab_json_of(this->value); }

 private:
  std::string_view stem_;
  bool indented_;
  std::string (*page_)(const Message&);
};

// What the analysis of a run gives: each file's step database, every tool's result, the texts the CLI prints.
struct AnalysisOutcome {
  // Each file's host, as the tools read it: its step database (step_database.h), in file order, the files that could
  // not be read left out.
  std::vector<podscope::v1::HostStepDatabase> step_databases;
  // The pod viewer's analysis, which the capture keeps and prints.
  podscope::v1::PodAnalysis analysis;
  // What the CLI prints after a capture: the pod summary with every tool's warnings, the overview's recommendation.
  std::string summary_text;
  std::string recommendation_text;
  // Every tool's advice, what costs the most first.
  std::vector<tensorflow::profiler::RankedAdvice> advice;
  // Every tool's result, in table order.
  std::vector<std::unique_ptr<ToolResult>> results;
  // Where each output was written, as a user would type it (a path, or a bucket URL).
  std::vector<std::string> written_files;
  // Files that could not be read (empty, truncated, or with lengths that lie: none of their planes is analysed),
  // each naming the file and what was wrong; the other files were analysed.
  std::vector<std::string> bad_files;
  // How many hosts were merged from their per-host databases instead of analysed (analysis/runner/analysis_runner.h),
  // and why a database beside a host file was not used: the run's, not any output's (the outputs are the same
  // either way).
  size_t hosts_from_databases = 0;
  std::vector<std::string> database_notes;

  // The value of the tool whose result holds a Value.
  template <typename Value>
  const Value& result() const {
    for (const auto& r : results) {
      if (const auto* held = dynamic_cast<const ToolValue<Value>*>(r.get())) return held->value;
    }
    throw std::bad_cast();
  }
};

// The builder of a tool's part of one host's file, for a tool that reads the planes: it reads the host's planes
// with a line it wants, in walks shared with the other tools (plane_walk.h), and, once the file was read, gives its
// part (its own message, serialized deterministically), told the host's step database (which names the host).
class HostPartBuilder : public PlaneConsumer {
 public:
  virtual absl::StatusOr<std::string> finish(const podscope::v1::HostStepDatabase& host) && = 0;
};

// The part builder of a tool whose builder is a PlaneConsumer with a part of its own (kernel stats, op stats, the
// memory profile: `take_part() &&`): the walks go straight to it.
template <typename Consumer>
class HostPartOf final : public HostPartBuilder {
 public:
  void begin_plane(size_t file_index, const xspace::XPlaneReader& plane,
                   std::vector<PlaneEventReader*>& readers) override {
    consumer_.begin_plane(file_index, plane, readers);
  }
  void end_plane(size_t file_index) override { consumer_.end_plane(file_index); }
  absl::StatusOr<std::string> finish(const podscope::v1::HostStepDatabase&) && override {
    return xspace::serialize_deterministically(std::move(consumer_).take_part());
  }

 private:
  Consumer consumer_;
};

template <typename Builder>
std::unique_ptr<HostPartBuilder> make_part_builder() {
  return std::make_unique<Builder>();
}

// What a tool finishes from: the pod's steps, each host's part (in file order; empty for a host without one), the
// pod viewer's options.
struct ToolInput {
  const PodSteps& pod;
  std::span<const std::string* const> parts;
  const PodAnalyzerOptions& options;
};

// Every host's part added to `builder` (`add_part(host_index, Part)`), in file order; a part that does not parse is
// left out.
template <typename Part, typename Builder>
Builder& add_parts(const ToolInput& input, Builder& builder) {
  for (size_t i = 0; i < input.parts.size(); ++i) {
    Part part;
    if (part.ParseFromString(*input.parts[i])) builder.add_part(i, part);
  }
  return builder;
}

// What a tool's file declares: what it reads and how it finishes its result (which makes its files, page, tab data and
// warnings: ToolResult).
struct ToolParts {
  // For a tool that reads the planes itself: the lines it reads (by plane and line name) and the builder of its part
  // of a host; null for the tools that read only the pod's steps.
  bool (*wants_line)(std::string_view plane_name, std::string_view line_name) = nullptr;
  std::unique_ptr<HostPartBuilder> (*host_part)() = nullptr;
  // Its result from every host's part, merged; it may add to the outcome's pod analysis and texts (the pod tool, the
  // overview).
  std::unique_ptr<ToolResult> (*finish)(const ToolInput& input, AnalysisOutcome& outcome) = nullptr;
};

// A row of the tool table.
struct Tool {
  std::string_view name;         // `podscope analyze RUN --tool NAME`; its tab's files are <name>.html and <name>.js
  std::string_view description;  // for --tool's help; empty: the name says it
  // Its report.html tab: the section "tab-<tab_id>" titled `tab_title`, whose drawing registers `drawers.<tab_id>`,
  // its data under `data_key` in the page's data.
  std::string_view tab_id;
  std::string_view tab_title;
  std::string_view data_key;
  ToolParts parts;
};

// A tool's tab files, embedded at build time: "<tool>.html", "<tool>.js" (empty: no such file).
std::string_view tool_tab_file(std::string_view file);

// A tool's result as <stem>.pb (its message, serialized deterministically) and <stem>.json (every field, zeros
// included, as XProf prints its tools' JSON; indented where `indented`).
std::vector<ToolFile> message_files(std::string_view stem, const google::protobuf::Message& result, bool indented);

// Every tool, in the order of the report's tabs.
std::span<const Tool> analysis_tools();
// The tool named `name`, or null.
const Tool* find_tool(std::string_view name);

// The result of the tool named `name` in `outcome`, or null.
const ToolResult* tool_result(const AnalysisOutcome& outcome, std::string_view name);

// The terminal page of the tool named `name`; without one, the overview's page, then the pod summary.
std::string tool_page(const AnalysisOutcome& outcome, std::string_view name);

// One host's analysis, read from its file's planes (a builder per file, the planes in one walk each for the step
// database and every tool's part): its step database and every tool's part.
class HostAnalysisBuilder {
 public:
  HostAnalysisBuilder();
  ~HostAnalysisBuilder();
  // The lines any of them reads.
  static bool wants_line(std::string_view plane_name, std::string_view line_name);
  void read_plane(const tensorflow::profiler::XPlane& plane);
  // Every plane was read; the XSpace's `hostnames` and the file's stem name the host when its planes do not.
  // ResourceExhausted when a part is over protobuf's 2 GiB.
  absl::StatusOr<podscope::v1::HostAnalysis> finish(const std::vector<std::string>& hostnames,
                                                    std::string_view file_stem) &&;

 private:
  std::unique_ptr<HostStepDatabaseBuilder> steps_;
  std::vector<std::unique_ptr<HostPartBuilder>> parts_;  // per tool in table order; null for those without one
};

// The pod's analysis from its hosts' analyses, in file order: the step databases merged into the pod's steps, every
// tool's result from its hosts' parts, the pod summary with every tool's warnings. The analysis of a run is this
// merge of its files' analyses.
AnalysisOutcome merge_host_analyses(std::vector<podscope::v1::HostAnalysis> hosts, const PodAnalyzerOptions& options);

// Advice ranked by what it costs: every cost (share of the step time), the largest first, then what is only a
// potential gain; ties keep the tools' order.
std::vector<tensorflow::profiler::RankedAdvice> rank_advice(std::vector<tensorflow::profiler::RankedAdvice> advice);

// report.html's tabs, one per tool, in table order.
absl::StatusOr<std::vector<ReportTab>> report_tabs(const AnalysisOutcome& outcome);

}  // namespace podscope::analysis
