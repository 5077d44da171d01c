// Clock sync over podscope.v1.Agent/Ping, NTP-style. Each exchange gives t0 (coordinator send), t1 (agent
// receive), t2 (agent send), t3 (coordinator receive). With symmetric paths the agent's offset is
// ((t1 − t0) + (t2 − t3)) / 2 and the true offset lies within ± (RTT − agent processing) / 2 of it
// whatever the asymmetry; so the estimate keeps only the exchanges with the smallest RTT. A ping delayed on
// either side (queued behind other pings to be sent, to be served, or to be read once answered) has a larger
// RTT, so it is discarded rather than biasing the offset, as long as the burst holds some undelayed ones.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace podscope::pod_capture {

struct PingExchange {
  int64_t t0_ns = 0;  // coordinator clock
  int64_t t1_ns = 0;  // agent clock
  int64_t t2_ns = 0;  // agent clock
  int64_t t3_ns = 0;  // coordinator clock

  int64_t offset_ns() const { return ((t1_ns - t0_ns) + (t2_ns - t3_ns)) / 2; }
  int64_t rtt_ns() const { return (t3_ns - t0_ns) - (t2_ns - t1_ns); }
};

struct ClockEstimate {
  int64_t offset_ns = 0;       // agent clock − coordinator clock
  int64_t rtt_ns = 0;          // smallest round trip seen
  int64_t error_bound_ns = 0;  // |true offset − offset_ns| ≤ this for any path asymmetry (largest kept RTT / 2)
  int64_t measured_at_ns = 0;  // coordinator time of the estimate (midpoint of the best exchange)
  int samples = 0;
};

// The largest RTT the estimate keeps beside a smallest one of `min_rtt_ns`: 10% more, at least 20 µs more.
int64_t near_minimal_rtt_cutoff(int64_t min_rtt_ns);

// Estimates from a burst: the median offset of the exchanges whose RTT is within near_minimal_rtt_cutoff of
// the smallest one. Using only near-minimal RTTs discards exchanges delayed by queueing or scheduling in
// one direction, which is what biases the offset.
absl::StatusOr<ClockEstimate> estimate_offset(const std::vector<PingExchange>& exchanges);

// True once a burst holds `enough` exchanges within near_minimal_rtt_cutoff of its smallest RTT: further pings
// could only add exchanges the estimate would weigh like these, so a quiet path settles in a few pings while a
// noisy one is pinged on.
bool burst_settled(const std::vector<PingExchange>& exchanges, size_t enough);

// How many pings of different agents a burst whose window is sized from what it observes keeps in flight: as many
// as the client can send and take in half a round trip of the path, between 1 and `max_in_flight`.
// `round_trip_ns` is the agents' typical smallest RTT (the median of them), `client_ns_per_ping` the client's own
// time per ping (sending, stamping and taking answers: its time not spent waiting for them). A window that fits
// in half a round trip leaves the client idle most of the time, so an answer waits at most for one ping being
// sent, and the smallest RTTs, which the estimate keeps and its bound is made of, stay the path's own; a larger
// one would have answers queue behind sends and every RTT grow with the window. Where the round trip is the
// client's own CPU (agents on the same few cores) this gives 1; across a network it grows with the RTT.
int ping_window_size(int64_t round_trip_ns, int64_t client_ns_per_ping, int max_in_flight);

// Whether a burst begun at `began_ns` that has finished `done` of its `agents` agents by `now_ns` would, at that
// pace, end after `finish_by_ns` (before any agent is done: whether `finish_by_ns` has passed).
bool burst_behind(int64_t began_ns, int64_t now_ns, size_t done, size_t agents, int64_t finish_by_ns);

// A running drift estimate from a long series of offsets (least-squares slope of offset over time).
// Two bursts seconds apart disagree by more than the drift they would measure, so the CLI never corrects
// for drift; the coordinator daemon feeds this from its periodic bursts and reports it.
class DriftEstimator {
 public:
  explicit DriftEstimator(size_t max_points = 256) : max_points_(max_points) {}
  void add(const ClockEstimate& estimate);
  // ppm (ns per ms); 0 until the series spans at least `min_span_ns`.
  double drift_ppm(int64_t min_span_ns = 60'000'000'000) const;
  size_t size() const { return points_.size(); }

 private:
  struct Point {
    int64_t at_ns;
    int64_t offset_ns;
  };
  size_t max_points_;
  std::vector<Point> points_;
};

}  // namespace podscope::pod_capture
