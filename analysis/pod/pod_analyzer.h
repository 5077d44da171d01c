// The pod viewer's analysis: from the pod's steps (pod_steps.h, merged from every host's step database) to a
// PodAnalysis: per core and step, where the time went; which core held the others back; how long each collective
// waited; how slow each send/recv-done channel was (channel endpoints on the coordinator's clock: each host's clock
// offset taken off). See docs/analysis.md.
#pragma once

#include <cstddef>

#include "analysis/steps/pod_steps.h"
#include "analysis/pod/straggler_analysis.h"
#include "podscope/v1/pod_analysis.pb.h"

namespace podscope::analysis {

struct PodAnalyzerOptions {
  // Channel utilization is measured against this (default: a 100 Gb/s link).
  double peak_link_bandwidth_bytes_per_s = 12.5e9;
  StragglerOptions stragglers;
  size_t top_op_count = 20;
};

podscope::v1::PodAnalysis analyze_pod_steps(const PodSteps& pod, const PodAnalyzerOptions& options = {});

// A core's id and chip id in the pod (docs/analysis.md, "Cores"): an annotated core's declared id (its plane id); a
// device plane with a rank stat, that rank; another device plane file index × 1000 + its ordinal; the host of a
// program without devices, file index × 1000.
struct PodCoreId {
  uint32_t core_id = 0;
  int32_t chip_id = 0;
};
PodCoreId pod_core_id(const PodCore& core);

}  // namespace podscope::analysis
