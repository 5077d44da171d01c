#include "pod_capture/clock_sync.h"

#include <algorithm>

#include "absl/status/status.h"

namespace podscope::pod_capture {

int64_t near_minimal_rtt_cutoff(int64_t min_rtt_ns) { return min_rtt_ns + std::max<int64_t>(min_rtt_ns / 10, 20'000); }

bool burst_settled(const std::vector<PingExchange>& exchanges, size_t enough) {
  if (exchanges.size() < enough) return false;
  int64_t min_rtt = exchanges.front().rtt_ns();
  for (const auto& e : exchanges) min_rtt = std::min(min_rtt, e.rtt_ns());
  const int64_t cutoff = near_minimal_rtt_cutoff(min_rtt);
  const auto near = std::count_if(exchanges.begin(), exchanges.end(),
                                  [&](const PingExchange& e) { return e.rtt_ns() >= 0 && e.rtt_ns() <= cutoff; });
  return static_cast<size_t>(near) >= enough;
}

absl::StatusOr<ClockEstimate> estimate_offset(const std::vector<PingExchange>& exchanges) {
  std::vector<PingExchange> valid;
  for (const auto& e : exchanges) {
    if (e.rtt_ns() >= 0 && e.t3_ns >= e.t0_ns && e.t2_ns >= e.t1_ns) valid.push_back(e);
  }
  if (valid.empty()) {
    return absl::InvalidArgumentError("clock sync: no valid ping exchange out of " + std::to_string(exchanges.size()));
  }
  std::sort(valid.begin(), valid.end(),
            [](const PingExchange& a, const PingExchange& b) { return a.rtt_ns() < b.rtt_ns(); });
  const int64_t min_rtt = valid.front().rtt_ns();
  const int64_t cutoff = near_minimal_rtt_cutoff(min_rtt);
  std::vector<int64_t> offsets;
  int64_t largest_kept_rtt = min_rtt;
  for (const auto& e : valid) {
    if (e.rtt_ns() > cutoff) break;
    offsets.push_back(e.offset_ns());
    largest_kept_rtt = e.rtt_ns();
  }
  std::nth_element(offsets.begin(), offsets.begin() + offsets.size() / 2, offsets.end());
  ClockEstimate out;
  out.offset_ns = offsets[offsets.size() / 2];
  out.rtt_ns = min_rtt;
  // Each kept offset is within half its own RTT of the truth, so their median is within half the largest.
  out.error_bound_ns = (largest_kept_rtt + 1) / 2;
  out.measured_at_ns = valid.front().t0_ns + (valid.front().t3_ns - valid.front().t0_ns) / 2;
  out.samples = static_cast<int>(offsets.size());
  return out;
}

int ping_window_size(int64_t round_trip_ns, int64_t client_ns_per_ping, int max_in_flight) {
  const int bound = std::max(1, max_in_flight);
  if (round_trip_ns <= 0 || client_ns_per_ping <= 0) return 1;
  const int64_t fits = round_trip_ns / (2 * client_ns_per_ping);
  return static_cast<int>(std::clamp<int64_t>(fits, 1, bound));
}

bool burst_behind(int64_t began_ns, int64_t now_ns, size_t done, size_t agents, int64_t finish_by_ns) {
  if (done == 0) return now_ns >= finish_by_ns;
  const double per_agent_ns = static_cast<double>(now_ns - began_ns) / static_cast<double>(done);
  return static_cast<double>(now_ns) + per_agent_ns * static_cast<double>(agents - done) >
         static_cast<double>(finish_by_ns);
}

void DriftEstimator::add(const ClockEstimate& estimate) {
  points_.push_back({estimate.measured_at_ns, estimate.offset_ns});
  if (points_.size() > max_points_) points_.erase(points_.begin());
}

double DriftEstimator::drift_ppm(int64_t min_span_ns) const {
  if (points_.size() < 3 || points_.back().at_ns - points_.front().at_ns < min_span_ns) return 0.0;
  // Relative to the first point, so the sums stay well inside double precision.
  const double x0 = static_cast<double>(points_.front().at_ns);
  const double y0 = static_cast<double>(points_.front().offset_ns);
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& p : points_) {
    const double x = static_cast<double>(p.at_ns) - x0;
    const double y = static_cast<double>(p.offset_ns) - y0;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double n = static_cast<double>(points_.size());
  const double denominator = n * sxx - sx * sx;
  if (denominator <= 0) return 0.0;
  return (n * sxy - sx * sy) / denominator * 1e6;
}

}  // namespace podscope::pod_capture
