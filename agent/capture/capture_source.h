// A capture source is one place a capture window gathers data from: the host series, the local annotated
// processes, CUPTI injectors, upstream framework profiler servers, PyTorch (Kineto) processes. CaptureSession opens a
// window on every source at the start, closes them all at the end (duration elapsed, Terminate, client cancel or agent
// shutdown — all the same path), then asks each to add what it gathered to the capture's CaptureSpace.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "agent/capture/capture_memory.h"
#include "agent/capture/capture_space.h"
#include "tensorflow/profiler_service.pb.h"

namespace podscope::agent {

// What one capture may take in memory, from holding its events to sending its response.
inline constexpr size_t kDefaultCaptureMemoryLimitBytes = size_t{256} << 20;

struct CaptureWindow {
  std::string session_id;
  int64_t start_ns = 0;        // on the agent's clock (Clock::now_ns, which includes --clock_offset_ns)
  int64_t planned_end_ns = 0;  // start + duration; the actual end is given to close()
  size_t memory_limit_bytes = kDefaultCaptureMemoryLimitBytes;
  // That limit as the capture's sources share it out: the same ledger from plan() to collect().
  std::shared_ptr<CaptureMemory> memory = std::make_shared<CaptureMemory>(kDefaultCaptureMemoryLimitBytes);
  tensorflow::ProfileRequest request;  // as received, with defaults filled in (opts.version 0 → TF defaults)
};

struct StartLead {
  int64_t ns = 0;  // 0: open() at the start is soon enough
  std::string reason;
};

class CaptureSource {
 public:
  virtual ~CaptureSource() = default;
  virtual std::string_view name() const = 0;
  // How long before a window's start this source must learn of it (processes that poll for work), and why. A
  // capture starts at least this far after its request when any source asks for it, and says so.
  virtual StartLead start_lead() const { return {}; }
  // The window is planned: called once per capture, before the wait for its start, with the planned start and
  // end. open() follows at the start, unless the capture ends before it.
  virtual void plan(const CaptureWindow& /*window*/) {}
  // The window opens. Must return quickly (start remote work asynchronously).
  virtual void open(const CaptureWindow& window) = 0;
  // The window closes at `end_ns`. Must return quickly.
  virtual void close(int64_t end_ns) = 0;
  // Adds what was gathered (planes, lines, warnings) to `out`. May wait, bounded, for data in flight.
  virtual void collect(CaptureSpace& out) = 0;
};

}  // namespace podscope::agent
