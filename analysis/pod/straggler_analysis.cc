#include "analysis/pod/straggler_analysis.h"

#include <algorithm>

namespace podscope::analysis {
namespace {

int64_t median(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

struct CoreTally {
  uint32_t compared = 0;
  uint32_t straggling = 0;
  double excess_ns = 0;
  double cost_ns = 0;
  uint32_t compute_wins = 0;  // straggling steps where compute, not step time, stood out more
};

}  // namespace

std::vector<podscope::v1::Straggler> find_stragglers(const std::map<int64_t, std::map<uint32_t, CoreStepTimes>>& steps,
                                                     const std::map<uint32_t, std::string>& host_names,
                                                     const StragglerOptions& options) {
  std::map<uint32_t, CoreTally> tallies;
  for (const auto& [step, cores] : steps) {
    if (cores.size() < options.min_cores) continue;
    std::vector<int64_t> totals, computes;
    for (const auto& [core, t] : cores) {
      totals.push_back(t.total_ns);
      computes.push_back(t.compute_ns);
    }
    const int64_t median_total = median(totals);
    const int64_t median_compute = median(computes);
    const double threshold = std::max(options.min_excess_fraction * static_cast<double>(median_total),
                                      static_cast<double>(options.min_excess_ns));
    for (const auto& [core, t] : cores) {
      CoreTally& tally = tallies[core];
      ++tally.compared;
      const int64_t step_excess = t.total_ns - median_total;
      const int64_t compute_excess = t.compute_ns - median_compute;
      const int64_t excess = std::max(step_excess, compute_excess);
      if (static_cast<double>(excess) <= threshold) continue;
      ++tally.straggling;
      tally.excess_ns += static_cast<double>(excess);
      if (compute_excess >= step_excess) ++tally.compute_wins;
      // What the others lost: the time they sat in all-reduce sync, up to this core's excess.
      for (const auto& [other, o] : cores) {
        if (other != core) tally.cost_ns += static_cast<double>(std::min(o.sync_ns, excess));
      }
    }
  }
  std::vector<podscope::v1::Straggler> stragglers;
  for (const auto& [core, tally] : tallies) {
    if (2 * tally.straggling <= tally.compared) continue;
    podscope::v1::Straggler s;
    s.set_core_id(core);
    if (auto it = host_names.find(core); it != host_names.end()) s.set_host_name(it->second);
    s.set_straggling_steps(tally.straggling);
    s.set_compared_steps(tally.compared);
    s.set_mean_excess_us(tally.excess_ns / tally.straggling / 1e3);
    s.set_mean_cost_to_others_us(tally.cost_ns / tally.straggling / 1e3);
    s.set_reason(2 * tally.compute_wins >= tally.straggling ? "compute" : "step time");
    stragglers.push_back(std::move(s));
  }
  std::sort(stragglers.begin(), stragglers.end(),
            [](const auto& a, const auto& b) { return a.mean_excess_us() > b.mean_excess_us(); });
  return stragglers;
}

}  // namespace podscope::analysis
