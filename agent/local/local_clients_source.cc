#include "agent/local/local_clients_source.h"

#include "agent/local/custom_planes.h"

namespace podscope::agent {

void LocalClientsSource::open(const CaptureWindow& window) {
  start_ns_ = window.start_ns;
  end_ns_ = window.planned_end_ns;
  registry_->open_window(next_session_++, window.start_ns, window.planned_end_ns);
}

void LocalClientsSource::close(int64_t end_ns) {
  end_ns_ = end_ns;
  registry_->close_window();
}

void LocalClientsSource::collect(tensorflow::profiler::XSpace& space) {
  const auto captures = registry_->collect(flush_timeout_);
  uint64_t dropped = 0;
  for (const auto& c : captures) dropped += c.dropped_events;
  if (dropped > 0 && on_dropped_) on_dropped_(dropped);
  add_custom_planes(captures, clock_, CustomPlaneOptions{start_ns_, end_ns_}, space);
}

}  // namespace podscope::agent
