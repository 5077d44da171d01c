// The agent's view of the annotated processes connected to its local socket, and the capture window
// they take part in. Written by the socket server (io threads), read by the LocalClientsSource (capture
// thread) and the process collector (sampling pass); one short lock, never held while sending.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/events/compact_event_store.h"
#include "proto/local/frame_codec.h"

namespace podscope::agent {

class RecordedEvents;

struct LocalClientInfo {
  uint64_t connection = 0;
  int32_t pid = 0;
  uid_t uid = 0;
  std::string program;
  std::string job;
  std::vector<int32_t> cores;
  uint32_t protocol_version = 0;  // the local protocol version it registered with
  uint64_t dropped_events = 0;    // over all its captures
  uint16_t profiler_port = 0;     // the framework profiler server it announced on loopback (0: none)
};

// What one client sent for one capture window.
struct LocalClientCapture {
  LocalClientInfo client;
  HeldClientEvents events;  // what the window's memory budget kept, and exactly what it dropped
  // Serialized XSpaces from device tracers in the client (libpodscope_cupti), each reassembled whole.
  std::vector<std::string> device_spaces;
  std::string partial_device_space;  // chunks of the space being received
  uint64_t partial_device_total = 0;
  bool device_space_refused = false;  // the space being received did not fit the budget: skip its chunks
  std::vector<std::string> warnings;  // what went wrong with this client's data, for the XSpace
  uint64_t dropped_events = 0;
  bool complete = false;  // it answered the close (false: it disconnected or hung first)
};

class ClientRegistry {
 public:
  // Sends one encoded frame to a connection; called without the registry's lock held.
  using FrameSender = std::function<void(std::string frame)>;
  using Disconnector = std::function<void()>;

  uint64_t add_connection(int32_t peer_pid, uid_t peer_uid, FrameSender send, Disconnector disconnect);
  void remove_connection(uint64_t connection);
  void on_register(uint64_t connection, const local::RegisterMsg& msg);
  void on_events(uint64_t connection, local::EventsMsg&& msg);
  void on_input_stages(uint64_t connection, local::InputStagesMsg&& msg);
  void on_allocations(uint64_t connection, local::AllocationsMsg&& msg);
  void on_capture_done(uint64_t connection, const local::CaptureDoneMsg& msg);
  void on_device_planes(uint64_t connection, local::DevicePlanesMsg&& msg);
  void on_profiler_server(uint64_t connection, const local::ProfilerServerMsg& msg);

  std::vector<LocalClientInfo> clients() const;  // registered ones only
  // host:port of the profiler servers that connected clients announced, each once, sorted.
  std::vector<std::string> profiler_servers() const;
  // The pids of registered clients, into `out` (cleared; its capacity reused: no allocation once warm).
  void registered_pids(std::vector<int32_t>& out) const;

  // The capture window: open tells every registered client (and any that registers while it is open);
  // close asks them to flush; collect waits until each answered or left, at most `timeout`, drops the
  // ones that did not answer (they hang) and returns what was gathered. What clients send during the
  // window is held in a CompactEventStore of `memory_budget_bytes`.
  // `clients_offset_ns` is what the agent's clock adds to the clients' (system) clock: events outside the
  // window on that clock are not held.
  void open_window(uint64_t session, int64_t start_ns, int64_t end_ns, int64_t clients_offset_ns,
                   size_t memory_budget_bytes);
  // The window ends at `end_ns` (agent clock).
  void close_window(int64_t end_ns);
  std::vector<LocalClientCapture> collect(std::chrono::milliseconds timeout);
  bool window_open() const;
  // What the last collected window's store held when it closed, and the most it charged its budget.
  struct WindowCharge {
    size_t held_bytes = 0;
    size_t peak_charged_bytes = 0;
  };
  WindowCharge last_window_charge() const;

  // Continuous recording: every registered client (and any that registers later) is sent the CaptureOpen of
  // a recording session (local::kRecordingSessionBit set) that no close follows, so that it streams all its
  // events; they go to `recorder`. A capture window takes the clients over while it is open (its events are
  // recorded too) and each client is handed back to the recording once it answered the window's close.
  void start_recording(std::shared_ptr<RecordedEvents> recorder);
  // Closes the recording session on every client; the recorder keeps what it holds.
  void stop_recording();

 private:
  struct Connection {
    LocalClientInfo info;
    bool registered = false;
    FrameSender send;
    Disconnector disconnect;
  };
  enum class WindowState { kNone, kOpen, kClosing };

  static std::string frame(const local::Message& msg);
  template <typename Batch>
  void hold(uint64_t connection, const Batch& msg);

  mutable std::mutex mu_;
  std::condition_variable changed_;
  uint64_t next_connection_ = 1;
  std::map<uint64_t, Connection> connections_;
  WindowState window_ = WindowState::kNone;
  uint64_t session_ = 0;
  int64_t window_start_ns_ = 0, window_end_ns_ = 0;
  int64_t clients_offset_ns_ = 0;
  std::map<uint64_t, LocalClientCapture> gathered_;   // by connection, for clients in the window
  std::unique_ptr<CompactEventStore> window_events_;  // while a window is open or closing
  WindowCharge last_window_charge_;
  std::shared_ptr<RecordedEvents> recorder_;  // while recording
  uint64_t recording_session_ = 0;
  uint64_t recordings_started_ = 0;
};

}  // namespace podscope::agent
