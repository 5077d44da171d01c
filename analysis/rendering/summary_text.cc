#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/rendering/renderers.h"
#include "analysis/pod/step_category.h"
#include "analysis/steps/step_sampling.h"

namespace podscope::analysis {

std::string straggler_reason_text(const podscope::v1::Straggler& s) {
  if (s.reason() == "arrival") return "no category of its time above the others'";
  return absl::StrFormat("its %s %.3f ms above the others'", s.reason(), s.reason_excess_us() / 1e3);
}

std::string render_summary_text(const podscope::v1::PodAnalysis& analysis) {
  std::string out;
  const auto& counts = analysis.counts();
  absl::StrAppendFormat(&out, "pod analysis: %d cores, %d steps, %d files, %d events\n", analysis.cores_size(),
                        counts.steps(), counts.files(), counts.events());
  for (const auto& core : analysis.cores()) {
    absl::StrAppendFormat(&out, "core %u (%s, %s): %u steps, average step %.3f ms, bottleneck %s\n", core.core_id(),
                          core.host_name(), core.plane_name(), core.step_count(), core.average_step_us() / 1e3,
                          core.bottleneck());
    std::string shares;
    for (const StepCategoryInfo& c : all_step_categories()) {
      const auto it = core.average_breakdown_us().find(static_cast<int>(c.category));
      const double us = it == core.average_breakdown_us().end() ? 0.0 : it->second;
      if (us <= 0 || core.average_step_us() <= 0) continue;
      absl::StrAppendFormat(&shares, "%s%s %.1f%%", shares.empty() ? "" : ", ", c.display_name,
                            100.0 * us / core.average_step_us());
    }
    absl::StrAppend(&out, "    ", shares.empty() ? "(no time)" : shares, "\n");
  }
  if (analysis.stragglers_size() == 0) {
    absl::StrAppend(&out, "stragglers: none\n");
  } else {
    for (const auto& s : analysis.stragglers()) {
      absl::StrAppendFormat(
          &out,
          "straggler: core %u (%s): the others waited for it in %u of %u steps, %.3f ms per step "
          "(%s), costing %s %.3f ms of all-reduce sync per step in total\n",
          s.core_id(), s.host_name(), s.straggling_steps(), s.compared_steps(), s.mean_excess_us() / 1e3,
          straggler_reason_text(s),
          s.waiting_cores() == 1 ? "the other core" : absl::StrCat("the other ", s.waiting_cores(), " cores"),
          s.mean_cost_to_others_us() / 1e3);
    }
  }
  std::vector<const podscope::v1::ChannelInfo*> channels;
  std::vector<uint32_t> channel_steps;
  for (const auto& m : analysis.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    for (const auto& c : m.channel_db()) {
      channels.push_back(&c);
      channel_steps.push_back(m.step_num());
    }
  }
  std::vector<size_t> order(channels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Stable: equally slow channels stay in step and channel order.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return channels[a]->duration_us() > channels[b]->duration_us(); });
  for (size_t i = 0; i < std::min(kSlowestChannelsListed, order.size()); ++i) {
    const auto& c = *channels[order[i]];
    absl::StrAppendFormat(&out, "slow channel %d (step %u, core %u -> %u): %.1f us, %u bytes, send delay %.1f us\n",
                          c.channel_id(), channel_steps[order[i]], c.src_core_ids_size() ? c.src_core_ids(0) : 0,
                          c.dst_core_ids_size() ? c.dst_core_ids(0) : 0, c.duration_us(), c.data_size(),
                          c.send_delay_us());
  }
  absl::StrAppendFormat(&out, "all-reduce sync share of the pod: %.1f%%\n", 100.0 * analysis.all_reduce_sync_share());
  for (const auto& w : analysis.pod_viewer().diagnostics().warnings()) absl::StrAppend(&out, "warning: ", w, "\n");
  for (const auto& i : analysis.pod_viewer().diagnostics().info()) absl::StrAppend(&out, "note: ", i, "\n");
  if (counts.steps_shown() < counts.steps()) {
    absl::StrAppendFormat(&out,
                          "note: the per-step records show %u of the %u steps (the slowest, those of the slowest "
                          "channels, the rest evenly spaced); every figure above counts them all\n",
                          counts.steps_shown(), counts.steps());
  }
  return out;
}

}  // namespace podscope::analysis
