// Renderers of a PodAnalysis: the pod viewer's legacy JSON, the text summary the CLI prints, and the
// self-contained offline report.html. Pure functions: strings out, no files.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "podscope/v1/pod_analysis.pb.h"
#include "tensorflow/input_pipeline.pb.h"
#include "tensorflow/kernel_stats.pb.h"
#include "tensorflow/memory_profile.pb.h"
#include "tensorflow/overview_page.pb.h"
#include "tensorflow/tf_data_stats.pb.h"
#include "tensorflow/tf_stats.pb.h"

namespace podscope::analysis {

// pod_viewer.json in the schema the legacy pod viewer front end reads (podStatsSequence.podStatsMap[],
// channelDb, allReduceOpDb, coreIdToReplicaIdMap, runEnvironment), every key present on every record;
// our extra categories and the generic GPU categories are extra keys on each per-core record.
absl::StatusOr<std::string> render_pod_viewer_json(const podscope::v1::PodAnalysis& analysis);

// The PodViewerDatabase through protobuf's JSON printer (pod_viewer.pb.json).
absl::StatusOr<std::string> render_pod_viewer_proto_json(const podscope::v1::PodAnalysis& analysis);

// Wire bytes with map entries in key order, so the same analysis always gives the same file.
std::string serialize_deterministically(const google::protobuf::Message& message);

// Protobuf's JSON form of `message` with map entries in key order (the printer alone follows the maps'
// hash order, which changes from run to run).
absl::StatusOr<std::string> to_deterministic_json(const google::protobuf::Message& message, bool add_whitespace,
                                                  bool always_print_primitive_fields);

// Per core average step time, breakdown shares, bottleneck; stragglers; slowest channels; the pod's
// all-reduce sync share.
std::string render_summary_text(const podscope::v1::PodAnalysis& analysis);

// What report.html shows: a tab per tool.
struct ReportContents {
  const podscope::v1::PodAnalysis& pod;
  const tensorflow::profiler::OverviewPage& overview;
  const tensorflow::profiler::InputPipelineAnalysisResult& input_pipeline;
  const tensorflow::profiler::CombinedTfDataStats& tf_data;
  const tensorflow::profiler::KernelStatsDb& kernel_stats;
  const tensorflow::profiler::MemoryProfile& memory_profile;
  const tensorflow::profiler::TfStatsDatabase& op_stats;
};

// One HTML file with inline data, style and script: works offline, loads nothing. Tabs: overview (with the
// step-time graph), input pipeline, tf.data, pod viewer, kernel stats, op stats, memory; the kernel and op tables
// sort by any column. Long tables are cut to what a page shows (the full results are the tools' own files).
absl::StatusOr<std::string> render_report_html(const ReportContents& contents, const std::string& title);

}  // namespace podscope::analysis
