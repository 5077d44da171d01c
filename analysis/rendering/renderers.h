// Renderers of a PodAnalysis: the pod viewer's legacy JSON, the text summary the CLI prints, and the
// self-contained offline report.html. Pure functions: strings out, no files.
#pragma once

#include <span>
#include <string>
#include <string_view>

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

// The PodViewerDatabase in protobuf's JSON form (pod_viewer.pb.json; json_writer.h).
absl::StatusOr<std::string> render_pod_viewer_proto_json(const podscope::v1::PodAnalysis& analysis);

// Per core average step time, breakdown shares, bottleneck; stragglers; slowest channels; the pod's
// all-reduce sync share.
std::string render_summary_text(const podscope::v1::PodAnalysis& analysis);

// What a straggler did while the others waited: "its compute 30.512 ms above the others'".
std::string straggler_reason_text(const podscope::v1::Straggler& straggler);

// One tab of report.html: the section "tab-<id>" titled `title`, its body, its drawing (a script that registers
// `drawers.<id>`), and its data, in protobuf's JSON form, under `data_key` in the page's data.
struct ReportTab {
  std::string_view id;
  std::string_view title;
  std::string_view body;
  std::string_view script;
  std::string_view data_key;
  std::string data_json;
};

// One HTML file with inline data, style and script (the page's files, report.html, report.css and report.js,
// embedded at build time): works offline, loads nothing. One tab per entry of `tabs`, in that order, the first shown.
std::string render_report_html(std::span<const ReportTab> tabs, const std::string& title);

}  // namespace podscope::analysis
