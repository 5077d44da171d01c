// In-memory XSpaces through the analysis' own path: one host step database per XSpace (named by its in-memory stem,
// as a run's files are by theirs), merged into the pod's steps, which the tools read; a host plane's step markers as
// the database's walk reads them.
#pragma once

#include <vector>

#include "analysis/steps/plane_walk.h"
#include "analysis/pod/pod_analyzer.h"
#include "analysis/steps/pod_steps.h"
#include "analysis/steps/step_database.h"
#include "analysis/steps/step_spans.h"
#include "podscope/v1/pod_analysis.pb.h"
#include "podscope/v1/step_database.pb.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis::testing {

inline std::vector<podscope::v1::HostStepDatabase> step_databases(
    const std::vector<const tensorflow::profiler::XSpace*>& spaces) {
  std::vector<podscope::v1::HostStepDatabase> hosts;
  for (size_t i = 0; i < spaces.size(); ++i) {
    hosts.push_back(build_host_step_database(*spaces[i], FileSteps::in_memory_stem(i)));
  }
  return hosts;
}

// The step markers of a host plane, as the step database's walk reads them.
inline HostStepMarkers read_host_step_markers(const tensorflow::profiler::XPlane& plane) {
  const xspace::XPlaneReader reader(plane);
  HostStepMarkerReader markers;
  PlaneEventReader* readers[] = {&markers};
  walk_plane(reader, readers);
  return std::move(markers).finish();
}

// The pod viewer's analysis of the XSpaces.
inline podscope::v1::PodAnalysis pod_analysis(const std::vector<const tensorflow::profiler::XSpace*>& spaces,
                                              const PodAnalyzerOptions& options = {}) {
  const std::vector<podscope::v1::HostStepDatabase> hosts = step_databases(spaces);
  return analyze_pod_steps(merge_step_databases(hosts), options);
}

}  // namespace podscope::analysis::testing
