// Triggered snapshots: every step of every annotated process goes through a SlowStepDetector; a slow step it
// admits freezes the flight recorder's window as a snapshot. The span is fixed when the slow step is seen: it
// ends `settle_ms` after the step's end (the slow step's own events are still on their way from the client)
// and reaches back the recorder's window. A thread of its own freezes it once that end has passed: the local
// socket's thread only feeds the detector. When freezing cannot keep up (more than kMaxPending waiting) or a
// trigger's slow step has left the window by the time its turn comes, the trigger is dropped and counted; no
// snapshot is ever frozen late over another span.
//
// Snapshots are kept in memory zstd-compressed (a 10 s window of a fast trainer serialized is ~3.6 times the
// compact records the recorder holds it in, so a full window's snapshot alone would not fit the memory cap
// otherwise; packed it is ~a fifth): the newest flight_recorder_max_snapshots, together at most
// flight_recorder_max_mb of compressed bytes, and, with a repository root, written atomically as TensorBoard runs
// (<root>/plugins/profile/<id>/<host>.xplane.pb, with what the snapshot is beside it in
// <host>.stored_snapshot.txtpb). At start the agent finds the runs it wrote before (its host's files under the
// root), lists and serves them, and keeps all of them within flight_recorder_disk_mb; retention deletes the
// oldest first and counts them. Each snapshot is counted (podscope_triggered_snapshots_total{reason}), so is
// every slow step by what became of it (podscope_slow_steps_total{outcome}), logged in one line and handed to
// the reporter (the coordinator registration).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "daemon/lifecycle_component.h"
#include "agent/local/client_registry.h"
#include "agent/recorder/flight_recorder.h"
#include "agent/steps/slow_step_detector.h"
#include "daemon/clock.h"
#include "podscope/v1/agent.pb.h"

namespace podscope::agent {

struct TriggeredSnapshotSettings {
  SlowStepSettings slow_step;
  size_t max_snapshots = 10;
  size_t max_memory_bytes = size_t{64} << 20;  // all snapshots held in memory together
  std::filesystem::path runs_directory;        // <repository_root>/plugins/profile; empty: nothing written
  size_t max_disk_bytes = size_t{256} << 20;   // all of this host's snapshots under it, earlier runs' included
  int64_t settle_ms = 500;  // the client streams its events every 50 ms; a loaded host may take longer
};

// A stored snapshot: what it is, and its serialized XSpace.
struct StoredSnapshotData {
  podscope::v1::StoredSnapshot info;
  std::string xspace;
};

class TriggeredSnapshots final : public LifecycleComponent {
 public:
  // Triggers waiting to be frozen; past it a trigger is dropped and counted (outcome "freezer_busy").
  static constexpr size_t kMaxPending = 4;

  // Told of each snapshot frozen, with the snapshot and the recorder's window.
  using Reporter = std::function<void(const podscope::v1::StoredSnapshot& snapshot, int64_t window_ns)>;

  TriggeredSnapshots(FlightRecorder& recorder, std::shared_ptr<ClientRegistry> clients, const Clock& clock,
                     std::string host_name, TriggeredSnapshotSettings settings, prometheus::Registry& metrics);
  ~TriggeredSnapshots() override;

  std::string_view name() const override { return "triggered_snapshots"; }
  // Finds the snapshots stored under the runs directory before, applies the disk cap, starts freezing.
  absl::Status start() override;
  void stop() override;

  // Set before start().
  void set_reporter(Reporter reporter) { reporter_ = std::move(reporter); }
  // A step of process `pid` on the agent's clock; cheap (the local socket's thread).
  void observe_step(int32_t pid, const StepRecord& step);

  // Held now (in memory or on disk, earlier runs' included), oldest first.
  std::vector<podscope::v1::StoredSnapshot> list() const;
  // NOT_FOUND naming the id when none is held.
  absl::StatusOr<StoredSnapshotData> get(const std::string& id) const;
  // Snapshots frozen since the agent started.
  uint64_t triggered() const;
  uint64_t deleted() const;
  const TriggeredSnapshotSettings& settings() const { return settings_; }

 private:
  struct Held {
    podscope::v1::StoredSnapshot info;
    std::string packed;       // the serialized XSpace as one zstd frame; empty once retention took it out of memory
    uint64_t disk_bytes = 0;  // 0 when not on disk
  };
  // A slow step admitted by the detector and the span its snapshot covers, fixed then (agent clock).
  struct Trigger {
    SlowStep slow;
    bool inside_cooldown = false;
    int64_t end_ns = 0;  // the span reaches back the recorder's window from here
  };
  enum class Outcome {
    kSnapshot,
    kWithinCooldown,
    kWarmingUp,
    kBelowBar,
    kCovered,
    kFreezerBusy,
    kTooLate,
    kRecorderOff
  };
  static constexpr size_t kOutcomes = 8;

  void run();
  void freeze(const Trigger& trigger);
  podscope::v1::StoredSnapshot describe(const SlowStep& slow, const RecorderSnapshot& snapshot);
  // Writes the snapshot's serialized XSpace under the runs directory, noting where in `held`.
  absl::Status write(Held& held, const std::string& xspace);
  // The snapshots this host wrote under the runs directory before, oldest first.
  std::vector<Held> find_stored() const;
  void remove_from_disk(Held& held);
  void apply_retention();  // with mu_ held
  void count(Outcome outcome) { outcomes_[static_cast<size_t>(outcome)]->Increment(); }

  FlightRecorder& recorder_;
  std::shared_ptr<ClientRegistry> clients_;
  const Clock& clock_;
  const std::string host_name_;
  const TriggeredSnapshotSettings settings_;
  SlowStepDetector detector_;
  Reporter reporter_;
  prometheus::Counter& slow_step_snapshots_;
  prometheus::Counter& deleted_from_memory_;
  prometheus::Counter& deleted_from_disk_;
  std::vector<prometheus::Counter*> outcomes_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::deque<Trigger> pending_;
  std::deque<Held> held_;
  uint64_t sequence_ = 0;
  uint64_t triggered_ = 0;
  uint64_t deleted_ = 0;
  std::thread worker_;
};

}  // namespace podscope::agent
