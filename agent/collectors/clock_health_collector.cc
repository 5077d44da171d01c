#include "agent/collectors/clock_health_collector.h"

#include <sys/timex.h>

#include <cerrno>
#include <cstring>

namespace podscope::agent {

ClockHealth clock_health_from_timex(int result, int status, long maxerror_us, long esterror_us) {
  ClockHealth h;
  h.synchronized = result != TIME_ERROR && (status & STA_UNSYNC) == 0;
  h.estimated_error_s = static_cast<double>(esterror_us) * 1e-6;
  h.max_error_s = static_cast<double>(maxerror_us) * 1e-6;
  h.detail =
      std::string(h.synchronized ? "synchronized" : "host clock not synchronized (no NTP/chrony/PTP discipline)") +
      " (adjtimex: " + (status & STA_UNSYNC ? "STA_UNSYNC set, " : "") + "maxerror " + std::to_string(maxerror_us) +
      " us, esterror " + std::to_string(esterror_us) + " us)";
  return h;
}

void ClockHealthCollector::sample(int64_t now_ns, SampleSink& sink) {
  timex tx{};
  const int result = adjtimex(&tx);  // modes 0: read only
  if (result < 0) {
    state_.set(CollectorState::State::kUnavailable, std::string("adjtimex: ") + std::strerror(errno));
    return;
  }
  if (!declared_) {
    synchronized_ = sink.declare({.metric = "podscope_clock_synchronized",
                                  .help = "1 when the kernel reports the host clock synchronized (adjtimex)."});
    estimated_error_ = sink.declare({.metric = "podscope_clock_estimated_error_seconds",
                                     .help = "The kernel's estimated clock error (adjtimex esterror)."});
    max_error_ = sink.declare({.metric = "podscope_clock_max_error_seconds",
                               .help = "The kernel's maximum clock error (adjtimex maxerror)."});
    declared_ = true;
  }
  const bool unsync = result == TIME_ERROR || (tx.status & STA_UNSYNC) != 0;
  sink.record(synchronized_, now_ns, unsync ? 0 : 1);
  sink.record(estimated_error_, now_ns, static_cast<double>(tx.esterror) * 1e-6);
  sink.record(max_error_, now_ns, static_cast<double>(tx.maxerror) * 1e-6);
  // The text is rebuilt only when the state changes (the errors drift every pass; the text keeps the first).
  if (tx.status != last_status_ || result != last_result_) {
    ClockHealth h = clock_health_from_timex(result, tx.status, tx.maxerror, tx.esterror);
    state_.set(h.synchronized ? CollectorState::State::kOk : CollectorState::State::kDegraded,
               h.synchronized ? std::string() : h.detail);
    std::lock_guard lock(mu_);
    health_ = std::move(h);
    last_status_ = tx.status;
    last_result_ = result;
  }
}

ClockHealth ClockHealthCollector::health() const {
  std::lock_guard lock(mu_);
  return health_;
}

}  // namespace podscope::agent
