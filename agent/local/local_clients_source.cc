#include "agent/local/local_clients_source.h"

#include "agent/local/custom_planes.h"
#include "daemon/log.h"
#include "proto/xspace/utf8.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::agent {

void LocalClientsSource::open(const CaptureWindow& window) {
  start_ns_ = window.start_ns;
  end_ns_ = window.planned_end_ns;
  registry_->open_window(next_session_++, window.start_ns, window.planned_end_ns, clock_.from_system_ns(0),
                         window.memory->reserve(events_budget(window.memory->unreserved_bytes())));
}

void LocalClientsSource::close(int64_t end_ns) {
  end_ns_ = end_ns;
  registry_->close_window(end_ns);
}

void LocalClientsSource::collect(CaptureSpace& out) {
  const auto collect_start = std::chrono::steady_clock::now();
  const auto captures = registry_->collect(flush_timeout_);
  const auto gathered = std::chrono::steady_clock::now();
  WindowDrops drops;
  uint64_t kept = 0;
  for (const auto& c : captures) {
    kept += c.events.kept_events;
    drops.client_buffer_events += c.dropped_events;
    drops.budget_events += c.events.dropped_events();
    drops.budget_steps += c.events.dropped_steps();
  }
  if (on_dropped_) on_dropped_(drops);
  // The planes go to the wire as they are built: the capture holds one batch of events as objects at a time.
  add_custom_planes(captures, clock_,
                    CustomPlaneOptions{start_ns_, end_ns_, &out.written_planes(), &out.host_plane_stream()},
                    out.space());
  out.count_written_events(kept);
  for (const auto& c : captures) add_device_spaces(c, out.space());
  auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  const ClientRegistry::WindowCharge charge = registry_->last_window_charge();
  auto per_kept = [kept](size_t bytes) { return kept == 0 ? 0 : bytes / kept; };
  PODSCOPE_LOG(kInfo) << "local clients: " << captures.size() << " client(s), " << kept << " events kept, "
                      << drops.budget_events << " dropped by the capture memory budget (" << drops.budget_steps
                      << " whole steps); held " << charge.held_bytes << " bytes (" << per_kept(charge.held_bytes)
                      << " per kept event), charged at most " << charge.peak_charged_bytes << " ("
                      << per_kept(charge.peak_charged_bytes) << " per kept event); last batches in after "
                      << ms(gathered - collect_start) << " ms, planes built in "
                      << ms(std::chrono::steady_clock::now() - gathered) << " ms";
}

void LocalClientsSource::add_device_spaces(const LocalClientCapture& capture,
                                           tensorflow::profiler::XSpace& space) const {
  const std::string who =
      "local client pid " + std::to_string(capture.client.pid) + " (" + capture.client.program + "): ";
  for (const std::string& w : capture.warnings) space.add_warnings(who + w);
  if (!capture.partial_device_space.empty()) {
    space.add_warnings(who + "device planes incomplete: " + std::to_string(capture.partial_device_space.size()) +
                       " of " + std::to_string(capture.partial_device_total) + " bytes arrived; dropped");
  }
  for (const std::string& bytes : capture.device_spaces) {
    tensorflow::profiler::XSpace device;
    const absl::StatusOr<int> repaired = xspace::parse_replacing_invalid_utf8(bytes, device);
    if (!repaired.ok()) {
      space.add_warnings(who + "device planes dropped: " + std::string(repaired.status().message()));
      continue;
    }
    if (*repaired > 0) {
      space.add_warnings(who + "device planes: " + std::to_string(*repaired) +
                         " strings held invalid UTF-8; invalid sequences replaced by U+FFFD");
    }
    // The tracer stamps the client's system clock, as annotations do: apply the agent's clock offset.
    if (const int64_t offset = clock_.from_system_ns(0); offset != 0) xspace::shift_timestamps(device, offset);
    xspace::merge_space(std::move(device), space);
  }
}

}  // namespace podscope::agent
