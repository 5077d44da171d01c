// The input pipeline analyzer: from the pod's steps to XProf's InputPipelineAnalysisResult (device side per step,
// the input-bound verdict, the host side by input category and op), plus podscope's per-host ranking; and its
// terminal page. Pure functions.
#pragma once

#include <string>
#include <string_view>

#include "analysis/steps/pod_steps.h"
#include "tensorflow/input_pipeline.pb.h"

namespace podscope::analysis {

// The verdict on a program whose steps spend `input_percent` of their time on input and `all_others_percent`
// on nothing the profile explains: HIGHLY (≥ 20 %), MODERATELY (≥ 5 %), POTENTIALLY (< 5 % but all others
// ≥ 3 %) or NOT input-bound.
std::string_view input_bound_verdict(double input_percent, double all_others_percent);

// Kernel launch, collectives and "all others" as bottlenecks by their share of step time: "high" (≥ 15 %),
// "moderate" (≥ 3 %) or "no".
std::string_view bottleneck_level(double percent);

// Every step once, as the pod's combined step (pod_steps.h) with the spread of step time and input wait across
// cores; summaries; the verdict (or "unknown, because ..." without steps); the host side from the tf.data / input
// ops and annotated input stages; hosts ranked by input share.
tensorflow::profiler::InputPipelineAnalysisResult pod_steps_to_input_pipeline(const PodSteps& pod);

std::string render_input_pipeline_text(const tensorflow::profiler::InputPipelineAnalysisResult& result);

}  // namespace podscope::analysis
