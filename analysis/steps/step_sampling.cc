#include "analysis/steps/step_sampling.h"

#include <algorithm>
#include <numeric>

namespace podscope::analysis {

std::vector<bool> steps_shown(const std::vector<int64_t>& duration_ns, const std::vector<size_t>& must_show,
                              size_t max_shown) {
  const size_t n = duration_ns.size();
  if (n <= max_shown) return std::vector<bool>(n, true);
  std::vector<bool> shown(n, false);
  size_t count = 0;
  auto show = [&](size_t i) {
    if (i < n && !shown[i] && count < max_shown) {
      shown[i] = true;
      ++count;
    }
  };
  for (size_t i : must_show) show(i);
  // The slowest, ties to the earlier step.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const size_t slowest = std::min(n, max_shown / 2);
  std::partial_sort(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(slowest), order.end(),
      [&](size_t a, size_t b) { return duration_ns[a] != duration_ns[b] ? duration_ns[a] > duration_ns[b] : a < b; });
  for (size_t i = 0; i < slowest && count < max_shown / 2; ++i) show(order[i]);
  // The rest evenly spaced over the steps not yet shown, their first and last included: exactly max_shown in all.
  std::vector<size_t> rest;
  rest.reserve(n - count);
  for (size_t i = 0; i < n; ++i) {
    if (!shown[i]) rest.push_back(i);
  }
  const size_t spaced = max_shown - count;
  for (size_t k = 0; k < spaced; ++k) show(rest[spaced == 1 ? 0 : k * (rest.size() - 1) / (spaced - 1)]);
  return shown;
}

}  // namespace podscope::analysis
