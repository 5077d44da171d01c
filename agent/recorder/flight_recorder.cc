#include "agent/recorder/flight_recorder.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include <prometheus/family.h>

#include "agent/local/custom_planes.h"
#include "daemon/heap.h"
#include "daemon/host_metrics.h"
#include "daemon/log.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::agent {
namespace {

constexpr std::string_view kLeftOutWarning =
    "flight recorder snapshot: upstream framework servers and device tracers (CUPTI) cannot look back and are "
    "not in it; annotated processes' events and the agent's sampled series are";

}  // namespace

FlightRecorder::FlightRecorder(std::shared_ptr<ClientRegistry> registry, const Clock& clock, std::string host_name,
                               std::unique_ptr<CaptureSource> look_back, std::function<int64_t()> sample_now,
                               prometheus::Registry& metrics)
    : registry_(std::move(registry)),
      clock_(clock),
      host_name_(std::move(host_name)),
      look_back_(std::move(look_back)),
      sample_now_(std::move(sample_now)),
      held_bytes_(host_gauge(metrics, host_name_, "podscope_flight_recorder_held_bytes",
                             "Bytes the flight recorder holds, charged against flight_recorder_max_mb")),
      held_events_(host_gauge(metrics, host_name_, "podscope_flight_recorder_held_events",
                              "Events of annotated processes the flight recorder holds")),
      window_seconds_(host_gauge(metrics, host_name_, "podscope_flight_recorder_window_seconds",
                                 "The flight recorder's window (flight_recorder_seconds); 0 when it is off")),
      dropped_events_(
          host_counter(metrics, host_name_, "podscope_flight_recorder_dropped_events_total",
                       "Events the flight recorder dropped, oldest first, to stay within flight_recorder_max_mb")),
      snapshots_(host_counter(metrics, host_name_, "podscope_flight_recorder_snapshots_total",
                              "Snapshots built from the flight recorder (GetSnapshot and window requests)")),
      refused_(host_counter(metrics, host_name_, "podscope_flight_recorder_snapshots_refused_total",
                            "Snapshot requests refused after waiting for the builds before them (one at a time)")),
      held_seconds_(prometheus::BuildGauge()
                        .Name("podscope_flight_recorder_held_seconds")
                        .Help("Seconds of an annotated process the flight recorder holds whole, up to now (at most "
                              "flight_recorder_seconds; less where flight_recorder_max_mb dropped older events)")
                        .Register(metrics)) {}

FlightRecorder::~FlightRecorder() {
  if (events_) registry_->stop_recording();
}

absl::Status FlightRecorder::start(const FlightRecorderSettings& settings) {
  std::lock_guard lock(mu_);
  if (events_) {
    return absl::AlreadyExistsError("the flight recorder is already recording (window " +
                                    std::to_string(events_->settings().window_ns / 1'000'000'000) +
                                    " s); stop it first");
  }
  events_ = std::make_shared<RecordedEvents>(settings);
  recording_since_ns_ = clock_.now_ns();
  last_snapshot_end_ns_ = recording_since_ns_;
  registry_->start_recording(events_);
  PODSCOPE_LOG(kInfo) << "flight recorder on: window " << settings.window_ns / 1'000'000 << " ms, at most "
                      << (settings.max_bytes >> 20) << " MiB";
  window_seconds_.Set(static_cast<double>(settings.window_ns) * 1e-9);
  return absl::OkStatus();
}

absl::Status FlightRecorder::stop() {
  std::lock_guard lock(mu_);
  if (!events_) return absl::NotFoundError("the flight recorder is not recording");
  registry_->stop_recording();
  update_metrics(events_->state());
  events_.reset();
  update_metrics(FlightRecorderState{});
  window_seconds_.Set(0);
  held_bytes_.Set(0);
  held_events_.Set(0);
  PODSCOPE_LOG(kInfo) << "flight recorder off";
  return absl::OkStatus();
}

absl::StatusOr<std::unique_lock<std::timed_mutex>> FlightRecorder::claim_build_slot(WhenBuilding when_building) {
  if (when_building == WhenBuilding::kWait) return std::unique_lock(build_mu_);
  std::unique_lock slot(build_mu_, kSnapshotQueueWait);
  if (slot.owns_lock()) return slot;
  refused_.Increment();
  return absl::ResourceExhaustedError(
      "the flight recorder builds one snapshot at a time, to bound its memory, and "
      "others kept it busy for " +
      std::to_string(kSnapshotQueueWait.count()) + " s: retry later");
}

absl::StatusOr<RecorderSnapshot> FlightRecorder::snapshot_since_last(WhenBuilding when_building) {
  absl::StatusOr<std::unique_lock<std::timed_mutex>> slot = claim_build_slot(when_building);
  if (!slot.ok()) return slot.status();
  std::shared_ptr<RecordedEvents> events;
  int64_t asked_begin = 0, begin = 0, end = 0;
  {
    std::lock_guard lock(mu_);
    if (!events_) return absl::NotFoundError("no continuous profiling session: the flight recorder is not recording");
    events = events_;
    end = sample_now_();
    asked_begin = last_snapshot_end_ns_;
    begin = std::max(asked_begin, end - events_->settings().window_ns);
    last_snapshot_end_ns_ = end;
  }
  RecorderSnapshot snapshot = build(*events, asked_begin, begin, end);
  snapshot.build_slot = std::move(*slot);
  return snapshot;
}

absl::Status FlightRecorder::check_recording() const {
  if (events_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "the flight recorder is off on this agent (flight_recorder_seconds=0): it holds no past to capture; start "
      "the agent with --flight_recorder_seconds=N");
}

absl::StatusOr<RecorderSnapshot> FlightRecorder::last(int64_t duration_ms, WhenBuilding when_building) {
  if (duration_ms <= 0) {
    return absl::InvalidArgumentError("last_ms " + std::to_string(duration_ms) + " must be positive");
  }
  absl::StatusOr<std::unique_lock<std::timed_mutex>> slot = claim_build_slot(when_building);
  if (!slot.ok()) return slot.status();
  std::shared_ptr<RecordedEvents> events;
  int64_t asked_ns = 0, begin = 0, end = 0;
  {
    std::lock_guard lock(mu_);
    if (absl::Status s = check_recording(); !s.ok()) return s;
    events = events_;
    end = sample_now_();
    asked_ns = std::min<int64_t>(duration_ms, std::numeric_limits<int64_t>::max() / 1'000'000) * 1'000'000;
    begin = end - std::min(asked_ns, events_->settings().window_ns);
  }
  RecorderSnapshot snapshot = build(*events, end - asked_ns, begin, end);
  snapshot.build_slot = std::move(*slot);
  return snapshot;
}

absl::StatusOr<RecorderSnapshot> FlightRecorder::span(int64_t begin_ns, int64_t end_ns, WhenBuilding when_building) {
  if (end_ns <= begin_ns) {
    return absl::InvalidArgumentError("span [" + std::to_string(begin_ns) + ", " + std::to_string(end_ns) +
                                      "] ns is empty");
  }
  absl::StatusOr<std::unique_lock<std::timed_mutex>> slot = claim_build_slot(when_building);
  if (!slot.ok()) return slot.status();
  std::shared_ptr<RecordedEvents> events;
  int64_t begin = 0, end = 0;
  {
    std::lock_guard lock(mu_);
    if (absl::Status s = check_recording(); !s.ok()) return s;
    events = events_;
    const int64_t now = sample_now_();
    const int64_t window_ns = events_->settings().window_ns;
    end = std::min(end_ns, now);
    begin = std::max(begin_ns, now - window_ns);
    if (end <= begin) {
      return absl::OutOfRangeError("span [" + std::to_string(begin_ns) + ", " + std::to_string(end_ns) +
                                   "] ns is outside the flight recorder's window (it ends now, " + std::to_string(now) +
                                   ", and holds " + std::to_string(window_ns / 1'000'000) + " ms)");
    }
  }
  RecorderSnapshot snapshot = build(*events, begin_ns, begin, end);
  snapshot.build_slot = std::move(*slot);
  return snapshot;
}

std::optional<FlightRecorderState> FlightRecorder::state() const {
  std::lock_guard lock(mu_);
  if (!events_) return std::nullopt;
  return events_->state();
}

void FlightRecorder::publish_metrics() {
  {
    std::lock_guard lock(mu_);
    if (events_) update_metrics(events_->state());
  }
  if (built_since_trim_) return_built_memory();  // the builds that nobody returned (GetSnapshot, triggers)
}

void FlightRecorder::return_built_memory() {
  // A snapshot's build frees a heap of small objects that glibc keeps, in the arena of the thread that built it,
  // for reuse; builds run on whichever thread asked, so each would keep its own. Hand the pages back.
  built_since_trim_ = false;
  return_free_heap();
}
void FlightRecorder::update_metrics(const std::optional<FlightRecorderState>& state) {
  if (!state) return;
  held_bytes_.Set(static_cast<double>(state->held_bytes));
  held_events_.Set(static_cast<double>(state->held_events));
  if (state->dropped_events > dropped_reported_) {
    dropped_events_.Increment(static_cast<double>(state->dropped_events - dropped_reported_));
    dropped_reported_ = state->dropped_events;
  }
  // One gauge per process held; a process no longer held loses its gauge.
  std::map<int32_t, prometheus::Gauge*> now_held;
  for (const RecordedClient& c : state->clients) {
    auto it = held_seconds_by_pid_.find(c.client.pid);
    prometheus::Gauge* g =
        it != held_seconds_by_pid_.end()
            ? it->second
            : &held_seconds_.Add(
                  {{"host", host_name_}, {"pid", std::to_string(c.client.pid)}, {"program", c.client.program}});
    g->Set(state->held_seconds(c));
    now_held[c.client.pid] = g;
  }
  for (const auto& [pid, g] : held_seconds_by_pid_)
    if (!now_held.contains(pid)) held_seconds_.Remove(g);
  held_seconds_by_pid_ = std::move(now_held);
}

void FlightRecorder::warn_if_short(const std::vector<LocalClientCapture>& captures, RecorderSnapshot& snapshot,
                                   tensorflow::profiler::XSpace& space) const {
  const int64_t clients_offset = clock_.from_system_ns(0);
  std::string dropped_by;
  for (const LocalClientCapture& c : captures) {
    if (c.events.lost_until_ns == std::numeric_limits<int64_t>::min()) continue;
    const int64_t whole_since = c.events.lost_until_ns + clients_offset;
    if (whole_since <= snapshot.begin_ns) continue;
    snapshot.whole_since_ns = std::max(snapshot.whole_since_ns, std::min(whole_since, snapshot.end_ns));
    dropped_by +=
        (dropped_by.empty() ? "pid " : ", pid ") + std::to_string(c.client.pid) + " (" + c.client.program + ")";
  }
  const int64_t asked = snapshot.end_ns - snapshot.asked_begin_ns;
  const int64_t held = snapshot.end_ns - snapshot.whole_since_ns;
  // Shorter by more than a hundredth: rounding and the sampling pass's own time are no news.
  if (asked <= 0 || held >= asked - asked / 100) return;
  char text[96];
  std::snprintf(text, sizeof text, "flight recorder: holds %.3f s of the %.3f s asked",
                static_cast<double>(held) * 1e-9, static_cast<double>(asked) * 1e-9);
  std::string warning = text;
  if (snapshot.begin_ns > snapshot.asked_begin_ns) {
    warning += "; its window (flight_recorder_seconds) is " +
               std::to_string((snapshot.end_ns - snapshot.begin_ns) / 1'000'000) + " ms";
  }
  if (!dropped_by.empty()) {
    warning += "; its memory cap (flight_recorder_max_mb) had dropped older events of " + dropped_by +
               ": events before the held span were left out";
  }
  space.add_warnings(warning);
}

RecorderSnapshot FlightRecorder::build(RecordedEvents& events, int64_t asked_begin_ns, int64_t begin_ns,
                                       int64_t end_ns) {
  RecorderSnapshot snapshot;
  snapshot.asked_begin_ns = std::min(asked_begin_ns, begin_ns);
  snapshot.begin_ns = begin_ns;
  snapshot.end_ns = end_ns;
  snapshot.whole_since_ns = begin_ns;
  // The annotated processes' planes go to the wire as they are built, then the host plane (their step markers and
  // allocation records written as they were added), then the rest of the space.
  CaptureSpace out(host_name_);
  tensorflow::profiler::XSpace& space = out.space();
  const int64_t clients_offset = clock_.from_system_ns(0);
  std::vector<LocalClientCapture> captures = events.window(begin_ns - clients_offset, end_ns - clients_offset);
  warn_if_short(captures, snapshot, space);
  for (LocalClientCapture& c : captures) {
    if (const uint64_t dropped = c.events.dropped_events(); dropped > 0) {
      space.add_warnings("local client pid " + std::to_string(c.client.pid) + " (" + c.client.program +
                         "): the flight recorder's memory cap (flight_recorder_max_mb) had dropped events; " +
                         std::to_string(dropped) + " more in " + std::to_string(c.events.dropped_steps()) +
                         " incomplete steps were left out");
      c.events.drops.clear();
    }
  }
  add_custom_planes(captures, clock_,
                    CustomPlaneOptions{begin_ns, end_ns, &out.written_planes(), &out.host_plane_stream()}, space);
  for (const LocalClientCapture& c : captures) out.count_written_events(c.events.kept_events);
  std::vector<LocalClientCapture>().swap(captures);

  CaptureWindow window;
  window.session_id = "flight_recorder";
  window.start_ns = begin_ns;
  window.planned_end_ns = end_ns;
  look_back_->open(window);
  look_back_->close(end_ns);
  look_back_->collect(out);

  xspace::XPlaneBuilder(&out.host_plane())
      .stats()
      .add(xspace::kCaptureStartStat, begin_ns)
      .add(xspace::kCaptureEndStat, end_ns)
      .add(xspace::kRecordedWholeSinceStat, snapshot.whole_since_ns);
  space.add_warnings(std::string(kLeftOutWarning));
  snapshot.has_events = out.has_events();
  snapshot.xspace = out.finish();
  snapshots_.Increment();
  built_since_trim_ = true;
  std::lock_guard lock(mu_);
  if (events_.get() == &events) update_metrics(events.state());  // unless stopped meanwhile
  return snapshot;
}

}  // namespace podscope::agent
