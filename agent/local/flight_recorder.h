// The flight recorder's rolling window of what annotated processes sent: every batch of every registered
// client (while recording, clients stream continuously, see ClientRegistry::start_recording) is held in a
// CompactEventStore that keeps the latest events, bounded by time (`window_ns`: older chunks age out) and by
// memory (`max_bytes`, charged as a capture charges, so that building a snapshot of everything held stays
// inside it too: oldest chunks are dropped first and counted). Snapshots copy a span out and leave it held.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "agent/events/compact_event_store.h"
#include "agent/local/client_registry.h"

namespace podscope::agent {

struct FlightRecorderSettings {
  int64_t window_ns = 30'000'000'000;
  size_t max_bytes = size_t{64} << 20;
};

struct FlightRecorderState {
  int64_t window_ns = 0;
  size_t max_bytes = 0;
  size_t held_bytes = 0;       // charged against max_bytes now
  size_t peak_held_bytes = 0;  // the most ever charged
  uint64_t held_events = 0;
  uint64_t dropped_events = 0;  // dropped by max_bytes since recording started (not those that aged out)
  int64_t oldest_ns = 0;        // the earliest event held, clients' clock; 0 when none
};

class FlightRecorder {
 public:
  // `now_ns` is the clients' clock (the system clock); a test may pass its own.
  explicit FlightRecorder(FlightRecorderSettings settings, std::function<int64_t()> now_ns = {});

  // A batch the client sent while recording: events, input stages or allocation records.
  template <typename Batch>
  void add(const LocalClientInfo& client, const Batch& batch) {
    std::lock_guard lock(mu_);
    clients_[client.connection] = client;
    store_.add(client.connection, batch);
    expire();
  }
  // What every client recorded overlapping [begin_ns, end_ns] (clients' clock), one capture per client,
  // its drops those of the whole-step rule.
  std::vector<LocalClientCapture> window(int64_t begin_ns, int64_t end_ns);
  FlightRecorderState state() const;
  const FlightRecorderSettings& settings() const { return settings_; }

 private:
  void expire();  // with mu_ held

  const FlightRecorderSettings settings_;
  std::function<int64_t()> now_ns_;
  mutable std::mutex mu_;
  CompactEventStore store_;
  std::map<uint64_t, LocalClientInfo> clients_;  // by connection, while the store holds any of theirs
};

}  // namespace podscope::agent
