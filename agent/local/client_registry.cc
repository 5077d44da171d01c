#include "agent/local/client_registry.h"

#include <algorithm>

#include "agent/local/recorded_events.h"
#include "daemon/log.h"

namespace podscope::agent {
namespace {

// A device space is held as bytes, then parsed into objects about eight times its size, merged and
// serialized twice: its charge against the capture budget per byte received.
constexpr size_t kDeviceSpaceCostFactor = 11;

}  // namespace

std::string ClientRegistry::frame(const local::Message& msg) {
  std::string out;
  local::encode_frame(msg, out);
  return out;
}

uint64_t ClientRegistry::add_connection(int32_t peer_pid, uid_t peer_uid, FrameSender send, Disconnector disconnect) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_connection_++;
  Connection c;
  c.info.connection = id;
  c.info.pid = peer_pid;
  c.info.uid = peer_uid;
  c.send = std::move(send);
  c.disconnect = std::move(disconnect);
  connections_.emplace(id, std::move(c));
  return id;
}

void ClientRegistry::remove_connection(uint64_t connection) {
  std::lock_guard lock(mu_);
  auto it = connections_.find(connection);
  if (it == connections_.end()) return;
  if (it->second.registered) {
    PODSCOPE_LOG(kInfo) << "local client pid " << it->second.info.pid << " (" << it->second.info.program
                        << ") disconnected";
  }
  connections_.erase(it);
  changed_.notify_all();  // a collect() waiting for it stops waiting
}

void ClientRegistry::on_register(uint64_t connection, const local::RegisterMsg& msg) {
  FrameSender send;
  std::string open;
  {
    std::lock_guard lock(mu_);
    auto it = connections_.find(connection);
    if (it == connections_.end()) return;
    Connection& c = it->second;
    const bool first = !c.registered;
    c.registered = true;
    c.info.program = msg.program;
    c.info.job = msg.job;
    c.info.cores = msg.cores;
    c.info.protocol_version = msg.version;
    if (first) {
      PODSCOPE_LOG(kInfo) << "local client registered: pid " << c.info.pid << " (" << msg.program << "), job '"
                          << msg.job << "', " << msg.cores.size() << " core(s), protocol version " << msg.version;
    }
    if (window_ == WindowState::kOpen) {
      auto& g = gathered_[connection];
      g.client = c.info;
      if (first) {
        open = frame(local::CaptureOpenMsg{session_, window_start_ns_, window_end_ns_});
        send = c.send;
      }
    } else if (first && recorder_) {
      open = frame(local::CaptureOpenMsg{recording_session_, 0, 0});
      send = c.send;
    }
  }
  if (send) send(std::move(open));
}

// A batch goes to the flight recorder while it records (under its own session, or under a capture's, which
// a client joined meanwhile uses) and to the capture window it was sent for.
template <typename Batch>
void ClientRegistry::hold(uint64_t connection, const Batch& msg) {
  std::lock_guard lock(mu_);
  if (recorder_ && (msg.session == recording_session_ || (window_ != WindowState::kNone && msg.session == session_))) {
    if (auto c = connections_.find(connection); c != connections_.end() && c->second.registered)
      recorder_->add(c->second.info, msg);
  }
  if (window_ == WindowState::kNone || msg.session != session_) return;  // late data of an older window
  if (!gathered_.contains(connection)) return;
  window_events_->add(connection, msg);
}

void ClientRegistry::on_events(uint64_t connection, local::EventsMsg&& msg) { hold(connection, msg); }

void ClientRegistry::on_input_stages(uint64_t connection, local::InputStagesMsg&& msg) { hold(connection, msg); }

void ClientRegistry::on_allocations(uint64_t connection, local::AllocationsMsg&& msg) { hold(connection, msg); }

void ClientRegistry::on_device_planes(uint64_t connection, local::DevicePlanesMsg&& msg) {
  std::lock_guard lock(mu_);
  if (window_ == WindowState::kNone || msg.session != session_) return;  // late data of an older window
  auto it = gathered_.find(connection);
  if (it == gathered_.end()) return;
  LocalClientCapture& g = it->second;
  if (msg.offset != 0 && g.device_space_refused) return;
  if (!window_events_->charge(connection, msg.chunk.size() * kDeviceSpaceCostFactor)) {
    g.warnings.push_back("device planes: a space of " + std::to_string(msg.total_bytes) +
                         " bytes does not fit the capture memory budget; dropped");
    g.partial_device_space.clear();
    g.partial_device_total = 0;
    g.device_space_refused = true;
    return;
  }
  g.device_space_refused = false;
  if (msg.offset == 0) {
    if (!g.partial_device_space.empty()) {
      g.warnings.push_back("device planes: a space of " + std::to_string(g.partial_device_total) +
                           " bytes was cut off after " + std::to_string(g.partial_device_space.size()) + " bytes");
    }
    g.partial_device_space.clear();
    g.partial_device_total = msg.total_bytes;
  } else if (msg.offset != g.partial_device_space.size() || msg.total_bytes != g.partial_device_total) {
    g.warnings.push_back("device planes: chunk at offset " + std::to_string(msg.offset) + " of " +
                         std::to_string(msg.total_bytes) + " bytes does not follow the " +
                         std::to_string(g.partial_device_space.size()) + " bytes received; space dropped");
    g.partial_device_space.clear();
    g.partial_device_total = 0;
    return;
  }
  g.partial_device_space += msg.chunk;
  if (g.partial_device_space.size() == g.partial_device_total) {
    g.device_spaces.push_back(std::move(g.partial_device_space));
    g.partial_device_space.clear();
    g.partial_device_total = 0;
  }
}

void ClientRegistry::on_capture_done(uint64_t connection, const local::CaptureDoneMsg& msg) {
  FrameSender resume;
  std::string open;
  {
    std::lock_guard lock(mu_);
    if (window_ == WindowState::kNone || msg.session != session_) return;
    auto it = gathered_.find(connection);
    if (it == gathered_.end()) return;
    it->second.dropped_events = msg.dropped_events;
    it->second.complete = true;
    auto c = connections_.find(connection);
    if (c != connections_.end()) {
      c->second.info.dropped_events += msg.dropped_events;
      if (recorder_) {
        resume = c->second.send;
        open = frame(local::CaptureOpenMsg{recording_session_, 0, 0});
      }
    }
    changed_.notify_all();
  }
  if (resume) resume(std::move(open));
}

void ClientRegistry::start_recording(std::shared_ptr<RecordedEvents> recorder) {
  std::vector<FrameSender> senders;
  std::string open;
  {
    std::lock_guard lock(mu_);
    recorder_ = std::move(recorder);
    recording_session_ = local::kRecordingSessionBit | ++recordings_started_;
    open = frame(local::CaptureOpenMsg{recording_session_, 0, 0});
    for (const auto& [id, c] : connections_) {
      // Clients in a capture window are handed over when they answer its close.
      auto g = gathered_.find(id);
      const bool in_window = window_ != WindowState::kNone && g != gathered_.end() && !g->second.complete;
      if (c.registered && !in_window) senders.push_back(c.send);
    }
  }
  for (auto& s : senders) s(open);
}

void ClientRegistry::stop_recording() {
  std::vector<FrameSender> senders;
  std::string close;
  {
    std::lock_guard lock(mu_);
    if (!recorder_) return;
    recorder_.reset();
    close = frame(local::CaptureCloseMsg{recording_session_});
    for (const auto& [id, c] : connections_)
      if (c.registered) senders.push_back(c.send);
  }
  for (auto& s : senders) s(close);
}

void ClientRegistry::on_profiler_server(uint64_t connection, const local::ProfilerServerMsg& msg) {
  std::lock_guard lock(mu_);
  auto it = connections_.find(connection);
  if (it == connections_.end()) return;
  LocalClientInfo& info = it->second.info;
  if (info.profiler_port != msg.port) {
    PODSCOPE_LOG(kInfo) << "local client pid " << info.pid << " (" << info.program << ") serves its profiler on port "
                        << msg.port << ": captures are forwarded to it while it is connected";
  }
  info.profiler_port = static_cast<uint16_t>(msg.port);
}

std::vector<std::string> ClientRegistry::profiler_servers() const {
  std::vector<std::string> out;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, c] : connections_) {
      if (c.registered && c.info.profiler_port != 0) out.push_back("127.0.0.1:" + std::to_string(c.info.profiler_port));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<LocalClientInfo> ClientRegistry::clients() const {
  std::lock_guard lock(mu_);
  std::vector<LocalClientInfo> out;
  for (const auto& [id, c] : connections_)
    if (c.registered) out.push_back(c.info);
  return out;
}

void ClientRegistry::registered_pids(std::vector<int32_t>& out) const {
  out.clear();
  std::lock_guard lock(mu_);
  for (const auto& [id, c] : connections_)
    if (c.registered) out.push_back(c.info.pid);
}

bool ClientRegistry::window_open() const {
  std::lock_guard lock(mu_);
  return window_ == WindowState::kOpen;
}

void ClientRegistry::open_window(uint64_t session, int64_t start_ns, int64_t end_ns, int64_t clients_offset_ns,
                                 size_t memory_budget_bytes) {
  std::vector<FrameSender> senders;
  std::string open = frame(local::CaptureOpenMsg{session, start_ns, end_ns});
  {
    std::lock_guard lock(mu_);
    window_ = WindowState::kOpen;
    session_ = session;
    window_start_ns_ = start_ns;
    window_end_ns_ = end_ns;
    gathered_.clear();
    clients_offset_ns_ = clients_offset_ns;
    window_events_ = std::make_unique<CompactEventStore>(memory_budget_bytes, Retention::kEarliestAndLatest);
    window_events_->set_window(start_ns - clients_offset_ns, end_ns - clients_offset_ns);
    for (const auto& [id, c] : connections_) {
      if (!c.registered) continue;
      gathered_[id].client = c.info;
      senders.push_back(c.send);
    }
  }
  for (auto& s : senders) s(open);
}

void ClientRegistry::close_window(int64_t end_ns) {
  std::vector<FrameSender> senders;
  std::string close;
  {
    std::lock_guard lock(mu_);
    if (window_ != WindowState::kOpen) return;
    window_ = WindowState::kClosing;
    window_end_ns_ = end_ns;
    window_events_->set_window(window_start_ns_ - clients_offset_ns_, end_ns - clients_offset_ns_);
    close = frame(local::CaptureCloseMsg{session_});
    for (const auto& [id, g] : gathered_) {
      auto it = connections_.find(id);
      if (it != connections_.end()) senders.push_back(it->second.send);
    }
  }
  for (auto& s : senders) s(close);
}

std::vector<LocalClientCapture> ClientRegistry::collect(std::chrono::milliseconds timeout) {
  std::vector<Disconnector> hung;
  std::vector<LocalClientCapture> out;
  {
    std::unique_lock lock(mu_);
    if (window_ == WindowState::kNone) return out;
    auto all_answered = [&] {
      for (const auto& [id, g] : gathered_)
        if (!g.complete && connections_.count(id)) return false;
      return true;
    };
    changed_.wait_for(lock, timeout, all_answered);
    last_window_charge_ = {window_events_->held_bytes(), window_events_->peak_charged_bytes()};
    for (auto& [id, g] : gathered_) {
      auto it = connections_.find(id);
      if (!g.complete && it != connections_.end()) {
        PODSCOPE_LOG(kWarning) << "local client pid " << g.client.pid << " (" << g.client.program
                               << ") did not answer the capture close within " << timeout.count() << " ms; dropping it";
        hung.push_back(it->second.disconnect);
      }
      g.events = window_events_->take(id);
      out.push_back(std::move(g));
    }
    gathered_.clear();
    window_events_.reset();
    window_ = WindowState::kNone;
  }
  for (auto& d : hung) d();
  return out;
}

ClientRegistry::WindowCharge ClientRegistry::last_window_charge() const {
  std::lock_guard lock(mu_);
  return last_window_charge_;
}

}  // namespace podscope::agent
