// What the annotating threads and the background thread share, behind one mutex: the process's identity
// (cores, job, program), its interned names, the per-thread rings, the capture-window listeners, the announced
// profiler server, and the count of every event the process dropped.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "client/podscope.h"
#include "client/thread_ring.h"
#include "proto/local/frame_codec.h"

namespace podscope::client {

// The name id of a step begun without a name.
inline constexpr NameId kUnnamedStepId = 1;

class ProcessRegistry {
 public:
  ProcessRegistry();

  // The identity and ring sizes of a start: `options`, else the environment, else the defaults.
  void configure(const Options& options);
  // A start by init() after one for a capture-window listener: its cores and job replace the defaults.
  void adopt_identity(const Options& options);
  // At the negotiated `version`.
  local::RegisterMsg register_msg(uint32_t version) const;
  // Whether the identity changed since the last registration (and clears it).
  bool take_reregister();

  NameId intern(std::string_view name);
  // The interned name of `id` ("" for an unknown id).
  std::string name_of(NameId id) const;

  // A new ring for the calling thread, or null when max_threads rings exist.
  std::shared_ptr<ThreadRing> new_ring(int64_t thread_id);
  // The index of `core` among the declared cores; a core first named here is declared now.
  uint8_t core_index(int32_t core);
  // The rings and the declared cores, as of now.
  struct Snapshot {
    std::vector<std::shared_ptr<ThreadRing>> rings;
    std::vector<int32_t> cores;
  };
  Snapshot snapshot() const;
  // Frees the rings whose thread has exited and whose records were drained.
  void free_retired_rings();
  // Whether a live thread is inside a step begun before `tick`.
  bool thread_in_step_begun_before(uint64_t tick) const;

  void add_listener(CaptureWindowListener* listener);
  std::vector<CaptureWindowListener*> listeners() const;

  // This process serves its framework profiler on `port`: told to the agent once per connection.
  void announce_profiler(uint16_t port);
  // The announced port when it was not yet told on this connection (and marks it told).
  std::optional<uint16_t> take_profiler_port(bool new_connection);

  void count_ringless_drop() { ringless_drops_.fetch_add(1, std::memory_order_relaxed); }
  void count_unsent_drops(uint64_t events) { unsent_drops_.fetch_add(events, std::memory_order_relaxed); }
  // Every event dropped so far: by full rings, by threads without a ring, and by an agent that read too slowly.
  uint64_t total_dropped() const;

 private:
  mutable std::mutex mu_;
  std::vector<int32_t> cores_;
  std::string job_;
  std::string program_;
  bool reregister_ = false;
  std::vector<std::string> names_;
  std::unordered_map<std::string, NameId> name_ids_;
  std::vector<std::shared_ptr<ThreadRing>> rings_;
  size_t ring_capacity_ = 65536;
  size_t max_threads_ = 256;
  std::vector<CaptureWindowListener*> listeners_;
  uint16_t profiler_port_ = 0;  // 0: none announced
  bool profiler_told_ = false;  // on the current connection
  std::atomic<uint64_t> ringless_drops_{0};
  std::atomic<uint64_t> unsent_drops_{0};
};

}  // namespace podscope::client
