// The overview page: from the pod's steps (and the input pipeline result it embeds) to XProf's OverviewPage —
// performance summary, step-time graph, top device ops, run environment, recommendation — and its terminal
// page. Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analysis/steps/pod_steps.h"
#include "tensorflow/input_pipeline.pb.h"
#include "tensorflow/overview_page.pb.h"

namespace podscope::analysis {

tensorflow::profiler::OverviewPage pod_steps_to_overview_page(
    const PodSteps& pod, const tensorflow::profiler::InputPipelineAnalysisResult& input_pipeline);

// A piece of advice: its kind, what it costs (its share of the step time and the milliseconds a step it takes), what
// was seen and what to do; its level from its share, as the input pipeline analyzer grades a bottleneck.
tensorflow::profiler::RankedAdvice make_advice(std::string_view kind, double step_percent, double ms_per_step,
                                               std::string statement, std::string_view action);

// The overview's advice, each with its figure and what it costs (the run's advice ranks every tool's): input, kernel
// launch (with an accelerator), unexplained time, 32-bit device compute (with an accelerator).
std::vector<tensorflow::profiler::RankedAdvice> overview_advice(const tensorflow::profiler::OverviewPage& page);

// The run's advice, ranked, into the page's recommendation: the leading advice becomes its bottleneck and statement.
void show_ranked_advice(const std::vector<tensorflow::profiler::RankedAdvice>& ranked,
                        tensorflow::profiler::OverviewPage& page);

// The recommendation alone: its statement (the leading advice), then every piece of advice, what costs most first.
std::string render_overview_recommendation_text(const tensorflow::profiler::OverviewPage& page);
std::string render_overview_text(const tensorflow::profiler::OverviewPage& page);

}  // namespace podscope::analysis
