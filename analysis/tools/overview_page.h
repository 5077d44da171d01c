// The overview page: from the pod's steps (and the input pipeline result it embeds) to XProf's OverviewPage —
// performance summary, step-time graph, top device ops, run environment, recommendation — and its terminal
// page. Pure functions.
#pragma once

#include <string>

#include "analysis/steps/pod_steps.h"
#include "tensorflow/input_pipeline.pb.h"
#include "tensorflow/overview_page.pb.h"

namespace podscope::analysis {

tensorflow::profiler::OverviewPage pod_steps_to_overview_page(
    const PodSteps& pod, const tensorflow::profiler::InputPipelineAnalysisResult& input_pipeline);

// The recommendation alone: the input verdict and the dominant non-input bottleneck, each with what to try.
std::string render_overview_recommendation_text(const tensorflow::profiler::OverviewPage& page);
std::string render_overview_text(const tensorflow::profiler::OverviewPage& page);

}  // namespace podscope::analysis
