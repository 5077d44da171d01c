#include "analysis/runner/analysis_runner.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "analysis/input_pipeline.h"
#include "analysis/overview_page.h"
#include "analysis/renderers.h"
#include "analysis/step_model.h"
#include "analysis/tf_data_stats.h"
#include "analysis/tool_pages.h"
#include "daemon/atomic_file.h"
#include "kineto/trace_file.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace podscope::analysis {
namespace {

constexpr std::string_view kXSpaceSuffix = ".xplane.pb";

absl::StatusOr<std::vector<std::filesystem::path>> list_xspace_files(const std::filesystem::path& run_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(run_dir, ec)) {
    return absl::NotFoundError("run directory " + run_dir.string() + " does not exist or is not a directory");
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && ((name.size() > kXSpaceSuffix.size() && name.ends_with(kXSpaceSuffix)) ||
                                    kineto::is_kineto_trace_file_name(name))) {
      files.push_back(entry.path());
    }
  }
  if (ec) return absl::InternalError("listing run directory " + run_dir.string() + ": " + ec.message());
  if (files.empty()) {
    return absl::NotFoundError("run directory " + run_dir.string() +
                               " has no *.xplane.pb files and no torch.profiler traces (*.pt.trace.json[.gz])");
  }
  // File order fixes the global core numbering of TF/JAX device planes.
  std::sort(files.begin(), files.end());
  return files;
}

// The op-level tools, each folding the planes in as they pass.
struct OpToolBuilders {
  KernelStatsBuilder kernel_stats;
  MemoryProfileBuilder memory_profile;
  OpStatsBuilder op_stats;

  static bool wants_line(std::string_view plane_name, std::string_view line_name) {
    return KernelStatsBuilder::wants_line(plane_name, line_name) ||
           MemoryProfileBuilder::wants_line(plane_name, line_name) || OpStatsBuilder::wants_line(plane_name, line_name);
  }
  void add_plane(size_t file_index, const tensorflow::profiler::XPlane& plane) {
    kernel_stats.add_plane(plane);
    memory_profile.add_plane(file_index, plane);
    op_stats.add_plane(plane);
  }
};

// The tf.data bottleneck analysis' share of the reading: the input stages of annotated planes as they stream
// by, and a file's host plane with its lines only when its metadata names tf.data iterators.
class TfDataCollector {
 public:
  static bool wants_line(std::string_view plane_name, std::string_view line_name) {
    return plane_name.starts_with(xspace::kCustomPlanePrefix) && line_name == xspace::kInputPipelineLineName;
  }

  void add_plane(size_t file_index, const tensorflow::profiler::XPlane& plane) {
    if (plane.name() == xspace::kHostPlaneName) {
      file_host(file_index).add_host_plane(plane);
      if (names_tf_data_iterators(plane)) planes_.push_back({file_index, std::nullopt, xplane_to_tf_data_stats(plane)});
      return;
    }
    if (!std::string_view(plane.name()).starts_with(xspace::kCustomPlanePrefix)) return;
    PlaneTfDataStats stats = input_stages_to_tf_data_stats(plane);
    if (!stats.stats.input_pipelines().empty()) planes_.push_back({file_index, host_name_of(plane), std::move(stats)});
  }

  // The XSpace's own `hostnames` and the file's stem, which name the host when its host plane does not.
  void add_file_names(size_t file_index, const std::vector<std::string>& hostnames, std::string_view file_stem) {
    file_host(file_index).add_file_names(hostnames, file_stem);
  }

  tensorflow::profiler::CombinedTfDataStats finish() && {
    std::vector<HostTfDataStats> hosts;
    for (PlaneSource& p : planes_) {
      std::string host = p.host_name ? *p.host_name : file_host(p.file_index).host_name();
      hosts.push_back({std::move(host), std::move(p.stats)});
    }
    return combine_tf_data_stats(std::move(hosts));
  }

 private:
  struct PlaneSource {
    size_t file_index = 0;
    std::optional<std::string> host_name;  // the plane's own
    PlaneTfDataStats stats;
  };

  static std::optional<std::string> host_name_of(const tensorflow::profiler::XPlane& plane) {
    const auto name = xspace::XPlaneReader(plane).str_stat(xspace::kHostNameStat);
    return name ? std::optional<std::string>(std::string(*name)) : std::nullopt;
  }

  FileSteps& file_host(size_t file_index) {
    if (files_.size() <= file_index) files_.resize(file_index + 1);
    return files_[file_index];
  }

  std::vector<FileSteps> files_;
  std::vector<PlaneSource> planes_;
};

// Everything that reads the planes as they stream past.
struct PlaneConsumers {
  PodAnalyzer pod;
  StepModelBuilder steps;
  TfDataCollector tf_data;
  OpToolBuilders op_tools;

  static bool wants_line(std::string_view plane_name, std::string_view line_name) {
    return PodAnalyzer::wants_line(plane_name, line_name) || StepModelBuilder::wants_line(plane_name, line_name) ||
           TfDataCollector::wants_line(plane_name, line_name) || OpToolBuilders::wants_line(plane_name, line_name);
  }
};

// Feeds one file's planes to the analyzers. A file that breaks part way keeps the planes read before the break
// (a truncated capture still has whole planes); the error names the file and where it broke.
absl::Status read_into(PlaneConsumers& consumers, size_t index, const std::filesystem::path& file) {
  PodAnalyzer& analyzer = consumers.pod;
  TfDataCollector& tf_data = consumers.tf_data;
  std::error_code ec;
  if (std::filesystem::file_size(file, ec) == 0 && !ec) return absl::DataLossError(file.string() + " is empty");
  xspace::XSpaceHeader header;
  absl::Status status = kineto::read_run_file_planes(
      file,
      [&](const tensorflow::profiler::XPlane& plane) {
        analyzer.add_plane(index, plane);
        consumers.steps.add_plane(index, plane);
        tf_data.add_plane(index, plane);
        consumers.op_tools.add_plane(index, plane);
        return absl::OkStatus();
      },
      &header, PlaneConsumers::wants_line);
  // Kernels take their ops from their own file's launches, whether or not it broke part way.
  consumers.op_tools.kernel_stats.end_file();
  // The file's names, whether or not it broke part way: its stem names the host when its planes do not.
  const std::string stem = kineto::run_file_stem(file.filename().string());
  analyzer.add_file_names(index, header.hostnames, stem);
  consumers.steps.add_file_names(index, header.hostnames, stem);
  tf_data.add_file_names(index, header.hostnames, stem);
  if (!status.ok()) return status;
  // Device planes without steps of their own take them from the host plane's step markers, which the step model
  // read as the host plane passed.
  if (analyzer.awaits_host_markers(index)) analyzer.add_host_markers(index, consumers.steps.host_step_markers(index));
  // The host work the step model read fills the pod viewer's idle time as it fills the step tools'.
  analyzer.add_host_work(index, consumers.steps.end_file(index));
  return absl::OkStatus();
}

// The step tools from the step model.
void run_step_tools(StepModel model, AnalysisOutcome& outcome) {
  outcome.input_pipeline = step_model_to_input_pipeline(model);
  outcome.overview_page = step_model_to_overview_page(model, outcome.input_pipeline);
  outcome.recommendation_text = render_overview_recommendation_text(outcome.overview_page);
}

// Writes one output file atomically and records it.
absl::Status write_output(const std::filesystem::path& run_dir, std::string_view name, const std::string& content,
                          AnalysisOutcome& outcome) {
  const std::filesystem::path path = run_dir / name;
  if (absl::Status s = write_file_atomically(path, content); !s.ok()) return s;
  outcome.written_files.push_back(path);
  return absl::OkStatus();
}

absl::Status render_and_write(const std::filesystem::path& run_dir, const AnalysisOptions& options,
                              AnalysisOutcome& outcome) {
  const std::string title =
      options.report_title.empty() ? "podscope pod analysis: " + run_dir.filename().string() : options.report_title;
  auto legacy_json = render_pod_viewer_json(outcome.analysis);
  if (!legacy_json.ok()) return legacy_json.status();
  auto proto_json = render_pod_viewer_proto_json(outcome.analysis);
  if (!proto_json.ok()) return proto_json.status();
  auto html =
      render_report_html({outcome.analysis, outcome.overview_page, outcome.input_pipeline, outcome.tf_data_stats,
                          outcome.kernel_stats.db, outcome.memory_profile.profile, outcome.op_stats.db},
                         title);
  if (!html.ok()) return html.status();
  const std::string pod_viewer_pb = serialize_deterministically(outcome.analysis.pod_viewer());
  const std::string analysis_pb = serialize_deterministically(outcome.analysis);
  const std::pair<std::string_view, const std::string*> outputs[] = {{"pod_viewer.json", &*legacy_json},
                                                                     {"pod_viewer.pb", &pod_viewer_pb},
                                                                     {"pod_viewer.pb.json", &*proto_json},
                                                                     {"pod_analysis.pb", &analysis_pb},
                                                                     {"report.html", &*html},
                                                                     {"pod_summary.txt", &outcome.summary_text}};
  for (const auto& [name, content] : outputs) {
    if (absl::Status s = write_output(run_dir, name, *content, outcome); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Each tool's result as <tool>.pb (its XProf message) and <tool>.json (every field, zeros included, as XProf
// prints its tools' JSON).
absl::Status write_tool_files(const std::filesystem::path& run_dir, AnalysisOutcome& outcome) {
  struct ToolFiles {
    std::string_view name;
    const google::protobuf::Message* message;
    std::function<absl::StatusOr<std::string>()> json;
  };
  auto printed = [](const google::protobuf::Message& message, bool add_whitespace) {
    return [&message, add_whitespace] {
      return to_deterministic_json(message, add_whitespace, /*always_print_primitive_fields=*/true);
    };
  };
  const ToolFiles tools[] = {
      {"overview_page", &outcome.overview_page, printed(outcome.overview_page, true)},
      {"input_pipeline", &outcome.input_pipeline, printed(outcome.input_pipeline, true)},
      {"tf_data_stats", &outcome.tf_data_stats, printed(outcome.tf_data_stats, true)},
      {"kernel_stats", &outcome.kernel_stats.db, printed(outcome.kernel_stats.db, false)},
      {"framework_op_stats", &outcome.op_stats.db, printed(outcome.op_stats.db, false)},
      // One allocator at a time: printing the whole profile at once would dominate the analysis' peak memory.
      {"memory_profile", &outcome.memory_profile.profile,
       [&outcome] { return render_memory_profile_json(outcome.memory_profile.profile); }}};
  for (const ToolFiles& tool : tools) {
    absl::StatusOr<std::string> json = tool.json();
    if (!json.ok()) return json.status();
    if (absl::Status s =
            write_output(run_dir, std::string(tool.name) + ".pb", serialize_deterministically(*tool.message), outcome);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = write_output(run_dir, std::string(tool.name) + ".json", *json, outcome); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const std::filesystem::path& run_dir,
                                                      const AnalysisOptions& options) {
  absl::StatusOr<AnalysisOutcome> outcome = analyze_run_files(run_dir, options.analyzer);
  if (!outcome.ok()) return outcome.status();
  if (absl::Status s = render_and_write(run_dir, options, *outcome); !s.ok()) return s;
  if (absl::Status s = write_tool_files(run_dir, *outcome); !s.ok()) return s;
  return outcome;
}

absl::StatusOr<AnalysisOutcome> analyze_run_files(const std::filesystem::path& run_dir,
                                                  const PodAnalyzerOptions& options) {
  absl::StatusOr<std::vector<std::filesystem::path>> files = list_xspace_files(run_dir);
  if (!files.ok()) return files.status();
  AnalysisOutcome outcome;
  PlaneConsumers consumers{PodAnalyzer(options), StepModelBuilder(), TfDataCollector(), OpToolBuilders()};
  for (size_t i = 0; i < files->size(); ++i) {
    if (absl::Status s = read_into(consumers, i, (*files)[i]); !s.ok()) outcome.bad_files.emplace_back(s.message());
  }
  if (outcome.bad_files.size() == files->size()) {
    std::string all;
    for (const auto& bad : outcome.bad_files) all += "\n  " + bad;
    return absl::DataLossError("no file of " + run_dir.string() + " could be read:" + all);
  }
  outcome.analysis = std::move(consumers.pod).finish();
  run_step_tools(std::move(consumers.steps).finish(), outcome);
  outcome.tf_data_stats = std::move(consumers.tf_data).finish();
  outcome.tf_data_text = tf_data_stats_to_text(outcome.tf_data_stats);
  outcome.kernel_stats = std::move(consumers.op_tools.kernel_stats).finish();
  outcome.memory_profile = std::move(consumers.op_tools.memory_profile).finish();
  outcome.op_stats = std::move(consumers.op_tools.op_stats).finish();
  outcome.summary_text = render_summary_text(outcome.analysis);
  outcome.summary_text += render_op_tool_warnings(outcome.kernel_stats, outcome.memory_profile, outcome.op_stats);
  for (const auto& bad : outcome.bad_files) outcome.summary_text += "warning: file skipped: " + bad + "\n";
  return outcome;
}

}  // namespace podscope::analysis
