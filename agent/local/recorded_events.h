// RecordedEvents: what the flight recorder holds, the rolling window of what annotated processes sent: every batch of
// every registered client (while recording, clients stream continuously, see ClientRegistry::start_recording) is held
// in a CompactEventStore that keeps the latest events, bounded by time (`window_ns`: older chunks age out) and by
// memory (`max_bytes`, charged by the bytes really held: oldest chunks are dropped first, whole steps at a
// time, and counted). Snapshots copy a span out and leave it held; FlightRecorder builds them one at a time.
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

// What the recorder holds of one client.
struct RecordedClient {
  LocalClientInfo client;
  int64_t oldest_ns = 0;       // its earliest event held, clients' clock
  int64_t whole_since_ns = 0;  // from then on nothing of it was dropped by max_bytes (clients' clock)
  uint64_t events = 0;
};

struct FlightRecorderState {
  int64_t window_ns = 0;
  size_t max_bytes = 0;
  size_t held_bytes = 0;       // held, and charged against max_bytes, now
  size_t peak_held_bytes = 0;  // the most ever held
  uint64_t held_events = 0;
  uint64_t dropped_events = 0;  // dropped by max_bytes since recording started (not those that aged out)
  int64_t oldest_ns = 0;        // the earliest event held, clients' clock; 0 when none
  int64_t now_ns = 0;           // when this was read, clients' clock
  std::vector<RecordedClient> clients;
  // The seconds of `c` held whole now: from whole_since_ns to now, at most the window.
  double held_seconds(const RecordedClient& c) const;
};

class RecordedEvents {
 public:
  // `now_ns` is the clients' clock (the system clock); a test may pass its own.
  explicit RecordedEvents(FlightRecorderSettings settings, std::function<int64_t()> now_ns = {});

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
