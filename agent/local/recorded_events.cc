#include "agent/local/recorded_events.h"

#include <algorithm>
#include <chrono>

namespace podscope::agent {
namespace {

int64_t system_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RecordedEvents::RecordedEvents(FlightRecorderSettings settings, std::function<int64_t()> now_ns)
    : settings_(settings),
      now_ns_(now_ns ? std::move(now_ns) : std::function<int64_t()>(system_now_ns)),
      store_(settings.max_bytes, Retention::kLatest) {}

void RecordedEvents::expire() {
  store_.expire_before(now_ns_() - settings_.window_ns);
  if (clients_.size() == store_.client_ids().size()) return;
  const std::vector<uint64_t> held = store_.client_ids();
  std::erase_if(clients_,
                [&held](const auto& entry) { return !std::binary_search(held.begin(), held.end(), entry.first); });
}

std::vector<LocalClientCapture> RecordedEvents::window(int64_t begin_ns, int64_t end_ns) {
  std::lock_guard lock(mu_);
  expire();
  std::vector<LocalClientCapture> out;
  for (const auto& [connection, info] : clients_) {
    LocalClientCapture capture;
    capture.client = info;
    capture.events = store_.copy(connection, begin_ns, end_ns);
    capture.complete = true;
    if (capture.events.kept_events == 0 && capture.events.dropped_events() == 0) continue;
    out.push_back(std::move(capture));
  }
  return out;
}

FlightRecorderState RecordedEvents::state() const {
  std::lock_guard lock(mu_);
  FlightRecorderState s;
  s.window_ns = settings_.window_ns;
  s.max_bytes = settings_.max_bytes;
  s.held_bytes = store_.held_bytes();
  s.peak_held_bytes = store_.peak_charged_bytes();
  s.held_events = store_.held_events();
  s.dropped_events = store_.lost_events();
  s.oldest_ns = store_.oldest_start_ns();
  s.now_ns = now_ns_();
  for (const HeldSpan& span : store_.held_spans()) {
    auto info = clients_.find(span.client);
    if (info == clients_.end()) continue;
    s.clients.push_back({info->second, span.oldest_start_ns, span.whole_since_ns, span.events});
  }
  return s;
}

double FlightRecorderState::held_seconds(const RecordedClient& c) const {
  const int64_t held = std::clamp<int64_t>(now_ns - c.whole_since_ns, 0, window_ns);
  return static_cast<double>(held) * 1e-9;
}

}  // namespace podscope::agent
