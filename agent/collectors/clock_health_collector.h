// ClockHealthCollector: whether the kernel considers the host clock synchronized (adjtimex: STA_UNSYNC
// clear, no TIME_ERROR) and its estimated and maximum error. Cross-host captures are only as good as the
// clocks, so an unsynchronized clock shows in status, in metrics and in every capture's warnings.
#pragma once

#include <mutex>
#include <string>
#include <string_view>

#include "agent/collectors/collector.h"

namespace podscope::agent {

struct ClockHealth {
  bool synchronized = false;
  double estimated_error_s = 0;
  double max_error_s = 0;
  std::string detail;  // e.g. "synchronized (adjtimex: maxerror 16 us, esterror 2 us)"
};

// What a struct timex (from adjtimex) says about the clock.
ClockHealth clock_health_from_timex(int adjtimex_result, int status, long maxerror_us, long esterror_us);

class ClockHealthCollector final : public Collector {
 public:
  std::string_view name() const override { return "clock"; }
  CollectorState status() const override { return state_.get(); }
  CollectorState::State state() const override { return state_.state(); }
  void sample(int64_t now_ns, SampleSink& sink) override;
  ClockHealth health() const;

 private:
  CollectorStateCell state_;
  bool declared_ = false;
  SeriesId synchronized_ = 0, estimated_error_ = 0, max_error_ = 0;
  mutable std::mutex mu_;
  ClockHealth health_;
  int last_status_ = -1, last_result_ = -2;
};

}  // namespace podscope::agent
