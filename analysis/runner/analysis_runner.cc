#include "analysis/runner/analysis_runner.h"

#include <algorithm>

#include "analysis/renderers.h"
#include "daemon/atomic_file.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace podscope::analysis {
namespace {

constexpr std::string_view kXSpaceSuffix = ".xplane.pb";

}  // namespace

absl::StatusOr<AnalysisOutcome> analyze_run_directory(const std::filesystem::path& run_dir,
                                                      const AnalysisOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_directory(run_dir, ec)) {
    return absl::NotFoundError("run directory " + run_dir.string() + " does not exist or is not a directory");
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.size() > kXSpaceSuffix.size() && name.ends_with(kXSpaceSuffix)) {
      files.push_back(entry.path());
    }
  }
  if (ec) return absl::InternalError("listing run directory " + run_dir.string() + ": " + ec.message());
  if (files.empty()) return absl::NotFoundError("run directory " + run_dir.string() + " has no *.xplane.pb files");
  // File order fixes the global core numbering of TF/JAX device planes.
  std::sort(files.begin(), files.end());

  analysis::PodAnalyzer analyzer(options.analyzer);
  for (size_t i = 0; i < files.size(); ++i) {
    xspace::XSpaceHeader header;
    absl::Status status = xspace::read_xspace_planes(
        files[i],
        [&](const tensorflow::profiler::XPlane& plane) {
          analyzer.add_plane(i, plane);
          return absl::OkStatus();
        },
        &header, analysis::PodAnalyzer::wants_line);
    if (!status.ok()) return status;
    // Device planes without steps of their own: read the host plane again, this time with its lines, for
    // its step markers (only then, as those lines can outweigh the device planes).
    if (analyzer.awaits_host_markers(i)) {
      status = xspace::read_xspace_planes(
          files[i],
          [&](const tensorflow::profiler::XPlane& plane) {
            if (plane.name() == xspace::kHostPlaneName) analyzer.add_host_markers(i, plane);
            return absl::OkStatus();
          },
          nullptr, analysis::PodAnalyzer::wants_host_marker_line);
      if (!status.ok()) return status;
    }
    analyzer.add_hostnames(i, header.hostnames);
  }

  AnalysisOutcome outcome;
  outcome.analysis = std::move(analyzer).finish();
  outcome.summary_text = analysis::render_summary_text(outcome.analysis);

  const std::string title =
      options.report_title.empty() ? "podscope pod analysis: " + run_dir.filename().string() : options.report_title;
  auto legacy_json = analysis::render_pod_viewer_json(outcome.analysis);
  if (!legacy_json.ok()) return legacy_json.status();
  auto proto_json = analysis::render_pod_viewer_proto_json(outcome.analysis);
  if (!proto_json.ok()) return proto_json.status();
  auto html = analysis::render_report_html(outcome.analysis, title);
  if (!html.ok()) return html.status();
  const std::string pod_viewer_pb = analysis::serialize_deterministically(outcome.analysis.pod_viewer());
  const std::string analysis_pb = analysis::serialize_deterministically(outcome.analysis);
  const std::pair<std::string_view, const std::string*> outputs[] = {{"pod_viewer.json", &*legacy_json},
                                                                     {"pod_viewer.pb", &pod_viewer_pb},
                                                                     {"pod_viewer.pb.json", &*proto_json},
                                                                     {"pod_analysis.pb", &analysis_pb},
                                                                     {"report.html", &*html},
                                                                     {"pod_summary.txt", &outcome.summary_text}};
  for (const auto& [name, content] : outputs) {
    const std::filesystem::path path = run_dir / name;
    if (absl::Status s = write_file_atomically(path, *content); !s.ok()) return s;
    outcome.written_files.push_back(path);
  }
  return outcome;
}

}  // namespace podscope::analysis
