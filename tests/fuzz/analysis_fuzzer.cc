// The pure analysis tools and their renderings on any XSpace that parses: the pod analysis, the step model with
// the overview page and input pipeline analyzer, tf.data, kernel stats, the memory profile and op stats, each
// giving results or statuses, never a crash, a hang or undefined behaviour (the file-writing runner is left out:
// too slow to fuzz). Each tool reads the space once, so an execution stays as cheap as one pass over the input.
// Seeds: tests/data/analysis, tests/data/fuzz/analysis_fuzzer, ../shared/testdata.
#include <cstddef>
#include <cstdint>

#include "analysis/tools/input_pipeline.h"
#include "analysis/rendering/json_writer.h"
#include "analysis/tools/kernel_stats.h"
#include "analysis/tools/memory_profile.h"
#include "analysis/tools/op_stats.h"
#include "analysis/tools/overview_page.h"
#include "analysis/pod/pod_analyzer.h"
#include "analysis/rendering/renderers.h"
#include "analysis/steps/pod_steps.h"
#include "analysis/steps/step_database.h"
#include "analysis/tools/tf_data_stats.h"
#include "analysis/tools/tool_pages.h"
#include "proto/xspace/names.h"

namespace {

namespace tp = tensorflow::profiler;
namespace xspace = podscope::xspace;
using namespace podscope::analysis;  // NOLINT: every tool of the library is used here

tp::CombinedTfDataStats tf_data_of(const tp::XSpace& space) {
  std::vector<HostTfDataStats> hosts;
  for (const tp::XPlane& plane : space.planes()) {
    if (plane.name() == xspace::kHostPlaneName) {
      hosts.push_back({"host", xplane_to_tf_data_stats(plane)});
    } else if (plane.name().starts_with(xspace::kCustomPlanePrefix)) {
      hosts.push_back({"host", input_stages_to_tf_data_stats(plane)});
    }
  }
  return combine_tf_data_stats(std::move(hosts));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tp::XSpace space;
  if (!space.ParseFromArray(data, static_cast<int>(size))) return 0;
  const std::vector<podscope::v1::HostStepDatabase> hosts = {build_host_step_database(space, "host0")};
  const PodSteps pod = merge_step_databases(hosts);
  const podscope::v1::PodAnalysis analysis = analyze_pod_steps(pod);
  (void)render_pod_viewer_json(analysis);
  (void)render_summary_text(analysis);

  const tp::InputPipelineAnalysisResult input_pipeline = pod_steps_to_input_pipeline(pod);
  const tp::OverviewPage overview = pod_steps_to_overview_page(pod, input_pipeline);
  (void)render_overview_text(overview);
  (void)render_input_pipeline_text(input_pipeline);

  const tp::CombinedTfDataStats tf_data = tf_data_of(space);
  (void)tf_data_stats_to_text(tf_data);

  KernelStatsBuilder kernels;
  MemoryProfileBuilder memory;
  for (const tp::XPlane& plane : space.planes()) {
    kernels.add_plane(plane);
    memory.add_plane(0, plane);
  }
  const KernelStatsResult kernel_stats = std::move(kernels).finish();
  const MemoryProfileResult memory_profile = std::move(memory).finish();
  const OpStatsResult op_stats = xspace_to_op_stats(space);
  (void)render_kernel_stats_page(kernel_stats);
  (void)render_memory_profile_page(memory_profile);
  (void)render_memory_profile_json(memory_profile.profile);
  (void)render_op_stats_page(op_stats);
  (void)render_kernel_stats_warnings(kernel_stats);
  (void)render_memory_profile_warnings(memory_profile);
  (void)render_op_stats_warnings(op_stats);

  std::vector<ReportTab> tabs;
  const std::pair<std::string_view, const google::protobuf::Message*> shown[] = {{"overview", &overview},
                                                                                 {"input", &input_pipeline},
                                                                                 {"tfdata", &tf_data},
                                                                                 {"pod", &analysis},
                                                                                 {"kernels", &kernel_stats.db},
                                                                                 {"opstats", &op_stats.db},
                                                                                 {"memory", &memory_profile.profile}};
  for (const auto& [id, message] : shown) {
    auto json = message_to_json(*message, false);
    if (json.ok()) tabs.push_back({id, id, "", "", id, *std::move(json)});
  }
  (void)render_report_html(tabs, "fuzz");
  return 0;
}
