// The tf.data bottleneck analysis (tf_data_stats.h): reads the input stages of annotated planes as they stream by, and
// a file's host plane with its lines only when its metadata names tf.data iterators; a host's part is its planes'
// pipelines, each named by its host (the plane's own, else as the host's step database names it).
#include <optional>

#include "analysis/rendering/renderers.h"
#include "analysis/tools/tf_data_stats.h"
#include "analysis/tools/tool.h"
#include "proto/xspace/names.h"

namespace podscope::analysis {
namespace {

class TfDataBuilder final : public HostPartBuilder {
 public:
  static bool wants_line(std::string_view plane_name, std::string_view line_name) {
    return plane_name.starts_with(xspace::kCustomPlanePrefix) && line_name == xspace::kInputPipelineLineName;
  }

  void begin_plane(size_t, const xspace::XPlaneReader& plane, std::vector<PlaneEventReader*>& readers) override {
    if (plane.name() == xspace::kHostPlaneName) {
      if (names_tf_data_iterators(plane.proto()))
        planes_.push_back({std::nullopt, xplane_to_tf_data_stats(plane.proto())});
      return;
    }
    if (!plane.name().starts_with(xspace::kCustomPlanePrefix)) return;
    const auto host = plane.str_stat(xspace::kHostNameStat);
    stages_host_ = host ? std::optional<std::string>(std::string(*host)) : std::nullopt;
    stages_ = make_input_stage_stats_reader(plane);
    readers.push_back(stages_.get());
  }

  void end_plane(size_t) override {
    if (!stages_) return;
    PlaneTfDataStats stats = std::move(*stages_).finish();
    stages_.reset();
    if (!stats.stats.input_pipelines().empty()) planes_.push_back({std::move(stages_host_), std::move(stats)});
  }

  // Each plane's pipelines, named by the plane's host, else the file's.
  absl::StatusOr<std::string> finish(const podscope::v1::HostStepDatabase& host) && override {
    podscope::v1::TfDataPart part;
    for (PlaneSource& p : planes_) {
      auto* plane = part.add_planes();
      plane->set_host(p.host_name ? *p.host_name : host.host_name());
      *plane->mutable_stats() = std::move(p.stats.stats);
      plane->set_depth_bound_hits(p.stats.walk.depth_bound_hits);
      plane->set_call_bound_hits(p.stats.walk.call_bound_hits);
    }
    return xspace::serialize_deterministically(part);
  }

 private:
  struct PlaneSource {
    std::optional<std::string> host_name;  // the plane's own
    PlaneTfDataStats stats;
  };

  std::vector<PlaneSource> planes_;
  // The annotated input stages of the custom plane being walked, and the plane's own host name.
  std::unique_ptr<InputStageStatsReader> stages_;
  std::optional<std::string> stages_host_;
};

// Every host's pipelines, in file order, combined.
std::unique_ptr<ToolResult> finish(const ToolInput& input, AnalysisOutcome&) {
  std::vector<HostTfDataStats> planes;
  for (const std::string* bytes : input.parts) {
    podscope::v1::TfDataPart part;
    if (!part.ParseFromString(*bytes)) continue;
    for (auto& plane : *part.mutable_planes()) {
      planes.push_back(
          {plane.host(), {std::move(*plane.mutable_stats()), {plane.depth_bound_hits(), plane.call_bound_hits()}}});
    }
  }
  return std::make_unique<MessageResult<tensorflow::profiler::CombinedTfDataStats>>(
      combine_tf_data_stats(std::move(planes)), "tf_data_stats", true, &tf_data_stats_to_text);
}

}  // namespace

ToolParts tf_data_tool() { return {&TfDataBuilder::wants_line, &make_part_builder<TfDataBuilder>, &finish}; }

}  // namespace podscope::analysis
