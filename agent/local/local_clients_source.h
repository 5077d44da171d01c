// The capture source for annotated processes: opening a window tells every registered client to record,
// closing asks them to flush, and collect() waits (bounded) for their last batches and adds one
// `/device:CUSTOM:<core>` plane per annotated core (see custom_planes.h), then merges the device planes
// that tracers inside the clients sent (libpodscope_cupti's `/device:GPU:<n>`, `/host:CUPTI`, NVTX lines).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

#include "agent/capture/capture_source.h"
#include "agent/local/client_registry.h"
#include "daemon/clock.h"

namespace podscope::agent {

// What one window lost: events the clients dropped themselves, and what the capture memory budget dropped.
struct WindowDrops {
  uint64_t client_buffer_events = 0;
  uint64_t budget_events = 0;
  uint64_t budget_steps = 0;
};

class LocalClientsSource : public CaptureSource {
 public:
  // The share of what a capture's sources left unreserved (CaptureMemory) that the clients' events and device
  // planes reserve; the rest is for the host series and the capture's own bookkeeping.
  static size_t events_budget(size_t unreserved_bytes) { return unreserved_bytes / 8 * 7; }

  // `on_dropped` (optional) receives what each window lost (for the agent's metrics).
  LocalClientsSource(std::shared_ptr<ClientRegistry> registry, const Clock& clock,
                     std::function<void(const WindowDrops&)> on_dropped = {},
                     std::chrono::milliseconds flush_timeout = std::chrono::milliseconds(2000))
      : registry_(std::move(registry)),
        clock_(clock),
        on_dropped_(std::move(on_dropped)),
        flush_timeout_(flush_timeout) {}

  std::string_view name() const override { return "local_clients"; }
  void open(const CaptureWindow& window) override;
  void close(int64_t end_ns) override;
  void collect(CaptureSpace& out) override;

 private:
  void add_device_spaces(const LocalClientCapture& capture, tensorflow::profiler::XSpace& space) const;

  std::shared_ptr<ClientRegistry> registry_;
  const Clock& clock_;
  std::function<void(const WindowDrops&)> on_dropped_;
  std::chrono::milliseconds flush_timeout_;
  std::atomic<uint64_t> next_session_{1};
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
};

}  // namespace podscope::agent
