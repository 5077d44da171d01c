// The agent's flight recorder as its services see it: recording starts (at startup when flight_recorder_seconds
// > 0, or on TensorFlow's StartContinuousProfiling) and stops; snapshots of what it holds are built into an
// XSpace the way a Profile's is — the annotated processes' `/device:CUSTOM:<core>` planes from the recorder,
// and the sources that can look back (the host series the agent samples anyway, NVML/TPU counters included)
// for the same span. Upstream framework servers cannot look back and device tracers (CUPTI) are not run
// always-on: they are left out, and each snapshot says so in a warning. A snapshot never touches a running
// capture; a capture's events are recorded too.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "agent/capture/capture_source.h"
#include "agent/local/client_registry.h"
#include "agent/local/recorded_events.h"
#include "daemon/clock.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::agent {

// A snapshot: the span asked for and the span it covers (agent clock), from when on every annotated process's
// events are held whole, and its XSpace, serialized (the annotated processes' planes are written while they are
// built, never held whole as objects). While it lives no other snapshot is built: keep it only as long as
// answering needs it.
struct RecorderSnapshot {
  int64_t asked_begin_ns = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t whole_since_ns = 0;  // begin_ns, or later where flight_recorder_max_mb had dropped older events
  std::string xspace;
  bool has_events = false;  // whether any plane of it holds an event
  std::unique_lock<std::timed_mutex> build_slot;
};

// What a snapshot asked for while another is being built does.
enum class WhenBuilding {
  kWait,   // the agent's own triggers: they wait their turn
  kQueue,  // a client's request: waits its turn up to kSnapshotQueueWait, then is refused (RESOURCE_EXHAUSTED) and
           // counted; callers in parallel cannot pile builds up
};
inline constexpr std::chrono::seconds kSnapshotQueueWait{10};

class FlightRecorder {
 public:
  // `look_back` adds the sampled series of a past span (a HostSeriesSource of its own); `sample_now` runs a
  // sampling pass and returns its time (agent clock), the end of every snapshot.
  FlightRecorder(std::shared_ptr<ClientRegistry> registry, const Clock& clock, std::string host_name,
                 std::unique_ptr<CaptureSource> look_back, std::function<int64_t()> sample_now,
                 prometheus::Registry& metrics);
  ~FlightRecorder();

  // ALREADY_EXISTS when recording.
  absl::Status start(const FlightRecorderSettings& settings);
  // NOT_FOUND when not recording. What was recorded is dropped.
  absl::Status stop();
  // Snapshots are built one at a time (each holds the build slot while it lives): `when_building` says what a
  // request does meanwhile. Each says in a warning when it holds less than was asked.
  //
  // What was recorded since the previous call (since recording started, the first time), bounded by the
  // window. NOT_FOUND when not recording.
  absl::StatusOr<RecorderSnapshot> snapshot_since_last(WhenBuilding when_building);
  // The last `duration_ms` (bounded by the window). FAILED_PRECONDITION naming flight_recorder_seconds when
  // not recording; INVALID_ARGUMENT for a duration <= 0.
  absl::StatusOr<RecorderSnapshot> last(int64_t duration_ms, WhenBuilding when_building = WhenBuilding::kWait);
  // The span [begin_ns, end_ns] (agent clock), cut to what the window holds now. FAILED_PRECONDITION as last();
  // INVALID_ARGUMENT when the span is empty.
  absl::StatusOr<RecorderSnapshot> span(int64_t begin_ns, int64_t end_ns, WhenBuilding when_building);
  // Empty when not recording.
  std::optional<FlightRecorderState> state() const;
  // Sets the recorder's Prometheus gauges and counters from its state, and returns the memory of finished
  // builds.
  void publish_metrics();
  // Returns the memory of finished builds to the system.
  void return_built_memory();

 private:
  // FAILED_PRECONDITION naming flight_recorder_seconds when not recording (mu_ held).
  absl::Status check_recording() const;
  // The build slot, or RESOURCE_EXHAUSTED (counted) when a queued request's wait ran out.
  absl::StatusOr<std::unique_lock<std::timed_mutex>> claim_build_slot(WhenBuilding when_building);
  // Builds the span [begin_ns, end_ns] (agent clock) of `events`, asked from `asked_begin_ns`, with the build slot
  // and without mu_ (fixed under it by the caller): status and metrics answer while a window of seconds is built.
  RecorderSnapshot build(RecordedEvents& events, int64_t asked_begin_ns, int64_t begin_ns, int64_t end_ns);
  // Adds the warning that the snapshot holds less than asked, naming why, where it does.
  void warn_if_short(const std::vector<LocalClientCapture>& captures, RecorderSnapshot& snapshot,
                     tensorflow::profiler::XSpace& space) const;
  void update_metrics(const std::optional<FlightRecorderState>& state);

  std::shared_ptr<ClientRegistry> registry_;
  const Clock& clock_;
  std::string host_name_;
  std::unique_ptr<CaptureSource> look_back_;
  std::function<int64_t()> sample_now_;

  std::timed_mutex build_mu_;  // the build slot, held while a build runs (look_back_ is used only then); before mu_
  std::atomic<bool> built_since_trim_ = false;
  mutable std::mutex mu_;
  std::shared_ptr<RecordedEvents> events_;
  int64_t recording_since_ns_ = 0;  // agent clock
  int64_t last_snapshot_end_ns_ = 0;

  prometheus::Gauge& held_bytes_;
  prometheus::Gauge& held_events_;
  prometheus::Gauge& window_seconds_;
  prometheus::Counter& dropped_events_;
  prometheus::Counter& snapshots_;
  prometheus::Counter& refused_;
  prometheus::Family<prometheus::Gauge>& held_seconds_;
  std::map<int32_t, prometheus::Gauge*> held_seconds_by_pid_;
  uint64_t dropped_reported_ = 0;
};

}  // namespace podscope::agent
