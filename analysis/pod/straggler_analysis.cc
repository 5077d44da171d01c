#include "analysis/pod/straggler_analysis.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

namespace podscope::analysis {
namespace {

struct CoreTally {
  uint32_t compared = 0;
  uint32_t straggling = 0;
  double delay_ns = 0;
  double caused_ns = 0;
  uint32_t waiting_cores = 0;  // the most cores that waited for it in a step
  // Per category: how far its time was above the other cores' mean, summed over its straggling steps.
  std::array<double, kMaxStepCategoryId + 1> above_others{};
};

// What the straggler did while the others waited, by the category in which it spent the most time above them.
std::string reason_of(StepCategory c) {
  switch (c) {
    case StepCategory::kHighFlopsCompute:
    case StepCategory::kLowFlopsCompute: return "compute";
    case StepCategory::kHostInfeed:
    case StepCategory::kHostToDevice: return "input";
    case StepCategory::kKernelLaunch:
    case StepCategory::kHostCompute:
    case StepCategory::kCompilation: return "host work";
    case StepCategory::kIdle: return "idle time";
    default: return std::string(step_category_info(c).display_name);
  }
}

// The category whose excess over the others was largest (compute categories summed: high and low flops are one
// cause), with that excess.
std::pair<StepCategory, double> largest_excess(const CoreTally& tally) {
  std::array<double, kMaxStepCategoryId + 1> excess = tally.above_others;
  excess[static_cast<int>(StepCategory::kHighFlopsCompute)] += excess[static_cast<int>(StepCategory::kLowFlopsCompute)];
  excess[static_cast<int>(StepCategory::kLowFlopsCompute)] = 0;
  excess[static_cast<int>(StepCategory::kHostInfeed)] += excess[static_cast<int>(StepCategory::kHostToDevice)];
  excess[static_cast<int>(StepCategory::kHostToDevice)] = 0;
  excess[static_cast<int>(StepCategory::kAllReduceSync)] = 0;  // what it did not wait, the others did
  int best = 1;
  for (int id = 2; id <= kMaxStepCategoryId; ++id) {
    if (excess[id] > excess[best]) best = id;
  }
  return {static_cast<StepCategory>(best), excess[best]};
}

}  // namespace

std::vector<podscope::v1::Straggler> find_stragglers(const std::map<int64_t, std::map<uint32_t, CoreStepTimes>>& steps,
                                                     const std::map<uint32_t, std::string>& host_names,
                                                     const StragglerOptions& options) {
  std::map<uint32_t, CoreTally> tallies;
  for (const auto& [step, cores] : steps) {
    if (cores.size() < 2) continue;
    // The core the step's collectives waited for most: the one whose late arrival cost the others the most wait.
    const std::pair<const uint32_t, CoreStepTimes>* culprit = nullptr;
    double mean_step_ns = 0;
    for (const auto& entry : cores) {
      ++tallies[entry.first].compared;
      mean_step_ns += static_cast<double>(entry.second.total_ns) / static_cast<double>(cores.size());
      if (entry.second.caused_wait_ns > 0 && (!culprit || entry.second.caused_wait_ns > culprit->second.caused_wait_ns))
        culprit = &entry;
    }
    if (!culprit) continue;
    const double threshold =
        std::max(options.min_excess_fraction * mean_step_ns, static_cast<double>(options.min_excess_ns));
    const CoreStepTimes& t = culprit->second;
    if (static_cast<double>(t.delay_ns) <= threshold) continue;
    CoreTally& tally = tallies[culprit->first];
    ++tally.straggling;
    tally.delay_ns += static_cast<double>(t.delay_ns);
    tally.caused_ns += static_cast<double>(t.caused_wait_ns);
    tally.waiting_cores = std::max(tally.waiting_cores, static_cast<uint32_t>(cores.size() - 1));
    for (int id = 1; id <= kMaxStepCategoryId; ++id) {
      double others = 0;
      for (const auto& [core, o] : cores) {
        if (core != culprit->first) others += static_cast<double>(o.categories[id]);
      }
      tally.above_others[id] += static_cast<double>(t.categories[id]) - others / static_cast<double>(cores.size() - 1);
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
    s.set_mean_excess_us(tally.delay_ns / tally.straggling / 1e3);
    s.set_mean_cost_to_others_us(tally.caused_ns / tally.straggling / 1e3);
    s.set_waiting_cores(tally.waiting_cores);
    const auto [category, excess] = largest_excess(tally);
    if (excess > 0) {
      s.set_reason(reason_of(category));
      s.set_reason_excess_us(excess / tally.straggling / 1e3);
    } else {
      s.set_reason("arrival");
    }
    stragglers.push_back(std::move(s));
  }
  std::sort(stragglers.begin(), stragglers.end(), [](const auto& a, const auto& b) {
    return a.mean_cost_to_others_us() * a.straggling_steps() > b.mean_cost_to_others_us() * b.straggling_steps();
  });
  return stragglers;
}

}  // namespace podscope::analysis
