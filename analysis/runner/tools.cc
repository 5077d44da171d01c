#include "analysis/runner/tools.h"

#include <optional>
#include <utility>

#include "analysis/input_pipeline.h"
#include "analysis/json_writer.h"
#include "analysis/overview_page.h"
#include "analysis/step_spans.h"
#include "analysis/tf_data_stats.h"
#include "analysis/tool_pages.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::analysis {
namespace {

// The tf.data bottleneck analysis' share of the reading: the input stages of annotated planes as they stream
// by, and a file's host plane with its lines only when its metadata names tf.data iterators.
class TfDataBuilder final : public PlaneToolBuilder {
 public:
  static bool wants_line(std::string_view plane_name, std::string_view line_name) {
    return plane_name.starts_with(xspace::kCustomPlanePrefix) && line_name == xspace::kInputPipelineLineName;
  }

  void begin_plane(size_t file_index, const xspace::XPlaneReader& plane,
                   std::vector<PlaneEventReader*>& readers) override {
    if (plane.name() == xspace::kHostPlaneName) {
      file_host(file_index).add_host_plane(plane.proto());
      if (names_tf_data_iterators(plane.proto())) {
        planes_.push_back({file_index, std::nullopt, xplane_to_tf_data_stats(plane.proto())});
      }
      return;
    }
    if (!plane.name().starts_with(xspace::kCustomPlanePrefix)) return;
    const auto host = plane.str_stat(xspace::kHostNameStat);
    stages_host_ = host ? std::optional<std::string>(std::string(*host)) : std::nullopt;
    stages_ = make_input_stage_stats_reader(plane);
    readers.push_back(stages_.get());
  }

  void end_plane(size_t file_index) override {
    if (!stages_) return;
    PlaneTfDataStats stats = std::move(*stages_).finish();
    stages_.reset();
    if (!stats.stats.input_pipelines().empty())
      planes_.push_back({file_index, std::move(stages_host_), std::move(stats)});
  }

  void end_file(size_t file_index, const std::vector<std::string>& hostnames, std::string_view file_stem) override {
    file_host(file_index).add_file_names(hostnames, file_stem);
  }

  void finish(AnalysisOutcome& outcome) && override {
    std::vector<HostTfDataStats> hosts;
    for (PlaneSource& p : planes_) {
      std::string host = p.host_name ? *p.host_name : file_host(p.file_index).host_name();
      hosts.push_back({std::move(host), std::move(p.stats)});
    }
    outcome.tf_data_stats = combine_tf_data_stats(std::move(hosts));
    outcome.tf_data_text = tf_data_stats_to_text(outcome.tf_data_stats);
  }

 private:
  struct PlaneSource {
    size_t file_index = 0;
    std::optional<std::string> host_name;  // the plane's own
    PlaneTfDataStats stats;
  };

  FileSteps& file_host(size_t file_index) {
    if (files_.size() <= file_index) files_.resize(file_index + 1);
    return files_[file_index];
  }

  std::vector<FileSteps> files_;
  std::vector<PlaneSource> planes_;
  // The annotated input stages of the custom plane being walked, and the plane's own host name.
  std::unique_ptr<InputStageStatsReader> stages_;
  std::optional<std::string> stages_host_;
};

// A tool whose builder is a PlaneConsumer of its own: the walks go straight to it.
template <typename Builder>
class ConsumerTool : public PlaneToolBuilder {
 public:
  void begin_plane(size_t file_index, const xspace::XPlaneReader& plane,
                   std::vector<PlaneEventReader*>& readers) final {
    builder_.begin_plane(file_index, plane, readers);
  }
  void end_plane(size_t file_index) final { builder_.end_plane(file_index); }

 protected:
  Builder builder_;
};

class KernelStatsToolBuilder final : public ConsumerTool<KernelStatsBuilder> {
 public:
  // Kernels take their ops from their own file's launches, whether or not it broke part way.
  void end_file(size_t, const std::vector<std::string>&, std::string_view) override { builder_.end_file(); }
  void finish(AnalysisOutcome& outcome) && override { outcome.kernel_stats = std::move(builder_).finish(); }
};

class OpStatsToolBuilder final : public ConsumerTool<OpStatsBuilder> {
 public:
  void end_file(size_t, const std::vector<std::string>&, std::string_view) override {}
  void finish(AnalysisOutcome& outcome) && override { outcome.op_stats = std::move(builder_).finish(); }
};

class MemoryProfileToolBuilder final : public ConsumerTool<MemoryProfileBuilder> {
 public:
  void end_file(size_t, const std::vector<std::string>&, std::string_view) override {}
  void finish(AnalysisOutcome& outcome) && override { outcome.memory_profile = std::move(builder_).finish(); }
};

template <typename Builder>
std::unique_ptr<PlaneToolBuilder> make_builder() {
  return std::make_unique<Builder>();
}

// A tool's result as <stem>.pb (its XProf message) and <stem>.json (every field, zeros included, as XProf prints
// its tools' JSON; indented where `indented`).
std::vector<ToolFile> message_files(std::string_view stem, const google::protobuf::Message& result, bool indented) {
  std::vector<ToolFile> files;
  files.push_back({std::string(stem) + ".pb", serialize_deterministically(result)});
  files.push_back({std::string(stem) + ".json", message_to_json(result, indented)});
  return files;
}

std::vector<ToolFile> pod_files(const AnalysisOutcome& o) {
  std::vector<ToolFile> files;
  files.push_back({"pod_viewer.json", render_pod_viewer_json(o.analysis)});
  files.push_back({"pod_viewer.pb", serialize_deterministically(o.analysis.pod_viewer())});
  files.push_back({"pod_viewer.pb.json", render_pod_viewer_proto_json(o.analysis)});
  files.push_back({"pod_analysis.pb", serialize_deterministically(o.analysis)});
  files.push_back({"pod_summary.txt", o.summary_text});
  return files;
}

const Tool kTools[] = {
    {.name = "overview",
     .description = "",
     .reads = ToolInput::kStepModel,
     .wants_line = nullptr,
     .builder = nullptr,
     .page = [](const AnalysisOutcome& o) { return render_overview_text(o.overview_page); },
     .files = [](const AnalysisOutcome& o) { return message_files("overview_page", o.overview_page, true); },
     .tab_id = "overview",
     .tab_title = "Overview",
     .result = [](const AnalysisOutcome& o) -> const google::protobuf::Message& { return o.overview_page; }},
    {.name = "input_pipeline",
     .description = "",
     .reads = ToolInput::kStepModel,
     .wants_line = nullptr,
     .builder = nullptr,
     .page = [](const AnalysisOutcome& o) { return render_input_pipeline_text(o.input_pipeline); },
     .files = [](const AnalysisOutcome& o) { return message_files("input_pipeline", o.input_pipeline, true); },
     .tab_id = "input",
     .tab_title = "Input pipeline",
     .result = [](const AnalysisOutcome& o) -> const google::protobuf::Message& { return o.input_pipeline; }},
    {.name = "tf_data",
     .description = "tf.data bottlenecks",
     .reads = ToolInput::kPlanes,
     .wants_line = &TfDataBuilder::wants_line,
     .builder = &make_builder<TfDataBuilder>,
     .page = [](const AnalysisOutcome& o) { return o.tf_data_text; },
     .files = [](const AnalysisOutcome& o) { return message_files("tf_data_stats", o.tf_data_stats, true); },
     .tab_id = "tfdata",
     .tab_title = "tf.data",
     .result = [](const AnalysisOutcome& o) -> const google::protobuf::Message& { return o.tf_data_stats; }},
    {.name = "pod",
     .description = "the pod summary",
     .reads = ToolInput::kPodAnalysis,
     .wants_line = nullptr,
     .builder = nullptr,
     .page = [](const AnalysisOutcome& o) { return o.summary_text; },
     .files = &pod_files,
     .tab_id = "pod",
     .tab_title = "Pod viewer",
     .result = [](const AnalysisOutcome& o) -> const google::protobuf::Message& { return o.analysis; }},
    {.name = "kernel_stats",
     .description = "GPU kernels",
     .reads = ToolInput::kPlanes,
     .wants_line = &KernelStatsBuilder::wants_line,
     .builder = &make_builder<KernelStatsToolBuilder>,
     .page = [](const AnalysisOutcome& o) { return render_kernel_stats_page(o.kernel_stats); },
     .files = [](const AnalysisOutcome& o) { return message_files("kernel_stats", o.kernel_stats.db, false); },
     .tab_id = "kernels",
     .tab_title = "Kernel stats",
     .result = [](const AnalysisOutcome& o) -> const google::protobuf::Message& { return o.kernel_stats.db; }},
    {.name = "op_stats",
     .description = "framework ops",
     .reads = ToolInput::kPlanes,
     .wants_line = &OpStatsBuilder::wants_line,
     .builder = &make_builder<OpStatsToolBuilder>,
     .page = [](const AnalysisOutcome& o) { return render_op_stats_page(o.op_stats); },
     .files = [](const AnalysisOutcome& o) { return message_files("framework_op_stats", o.op_stats.db, false); },
     .tab_id = "opstats",
     .tab_title = "Op stats",
     .result = [](const AnalysisOutcome& o) -> const google::protobuf::Message& { return o.op_stats.db; }},
    {.name = "memory",
     .description = "the memory profile",
     .reads = ToolInput::kPlanes,
     .wants_line = &MemoryProfileBuilder::wants_line,
     .builder = &make_builder<MemoryProfileToolBuilder>,
     .page = [](const AnalysisOutcome& o) { return render_memory_profile_page(o.memory_profile); },
     .files =
         [](const AnalysisOutcome& o) {
           std::vector<ToolFile> files;
           files.push_back({"memory_profile.pb", serialize_deterministically(o.memory_profile.profile)});
           files.push_back({"memory_profile.json", render_memory_profile_json(o.memory_profile.profile)});
           return files;
         },
     .tab_id = "memory",
     .tab_title = "Memory",
     .result = [](const AnalysisOutcome& o) -> const google::protobuf::Message& { return o.memory_profile.profile; }},
};

}  // namespace

std::span<const Tool> analysis_tools() { return kTools; }

const Tool* find_tool(std::string_view name) {
  for (const Tool& tool : kTools)
    if (tool.name == name) return &tool;
  return nullptr;
}

std::string default_page(const AnalysisOutcome& outcome) {
  return find_tool("overview")->page(outcome) + "\n" + find_tool("pod")->page(outcome);
}

std::vector<ReportTab> report_tabs(const AnalysisOutcome& outcome) {
  std::vector<ReportTab> tabs;
  for (const Tool& tool : kTools) tabs.push_back({tool.tab_id, tool.tab_title, &tool.result(outcome)});
  return tabs;
}

}  // namespace podscope::analysis
