// An in-process stand-in for the agent's local-client half — the real LocalSocketServer, ClientRegistry
// and LocalClientsSource on a real Unix socket in a temp dir — for tests of libpodscope and
// ring_trainer that do not need the whole podscope-agent binary.
#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "agent/local/client_registry.h"
#include "agent/local/local_clients_source.h"
#include "agent/local/local_socket_server.h"
#include "daemon/clock.h"
#include "tests/eventually.h"
#include "tests/scratch_directory.h"

namespace podscope::testing {

class MiniAgent {
 public:
  explicit MiniAgent(std::string socket_path, agent::LocalSocketLimits limits = {})
      : socket_path_(std::move(socket_path)), limits_(limits) {}
  ~MiniAgent() { stop(); }

  void start() {
    io_ = std::make_unique<boost::asio::io_context>();
    work_ = std::make_unique<Work>(io_->get_executor());
    agent::LocalSocketConfig config;
    config.path = socket_path_;
    config.limits = limits_;
    server_ = std::make_unique<agent::LocalSocketServer>(
        *io_, config, *registry_, counters_, [this](int32_t pid, const std::string&, const local::StepsMsg& m) {
          std::lock_guard lock(mu_);
          for (const auto& s : m.steps) steps_[pid].push_back(s);
        });
    auto status = server_->start();
    if (!status.ok()) throw std::runtime_error(std::string(status.message()));
    thread_ = std::thread([this] { io_->run(); });
  }
  void stop() {
    if (!io_) return;
    boost::asio::post(*io_, [this] { server_->stop(); });
    work_.reset();
    thread_.join();
    server_.reset();
    io_.reset();
  }

  // Opens a window, waits `duration` (calling `during` first, if given), closes and gathers.
  tensorflow::profiler::XSpace capture(std::chrono::milliseconds duration, const std::function<void()>& during = {}) {
    agent::CaptureWindow window;
    window.start_ns = clock_.now_ns();
    window.planned_end_ns = window.start_ns + duration.count() * 1'000'000;
    const auto opened = std::chrono::steady_clock::now();
    source_.open(window);
    if (during) during();
    std::this_thread::sleep_until(opened + duration);
    source_.close(clock_.now_ns());
    agent::CaptureSpace out("mini-agent");
    source_.collect(out);
    tensorflow::profiler::XSpace space;
    space.ParseFromString(out.finish());
    return space;
  }

  std::vector<local::StepMsg> steps_of(int32_t pid) {
    std::lock_guard lock(mu_);
    return steps_[pid];
  }
  agent::ClientRegistry& registry() { return *registry_; }
  agent::LocalSocketCounts counts() const { return counters_.counts(); }
  uint64_t dropped() const { return dropped_; }

 private:
  using Work = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  std::string socket_path_;
  agent::LocalSocketLimits limits_;
  prometheus::Registry metrics_;
  agent::LocalSocketCounters counters_{metrics_, "mini-agent"};
  Clock clock_;
  std::shared_ptr<agent::ClientRegistry> registry_ = std::make_shared<agent::ClientRegistry>();
  std::atomic<uint64_t> dropped_{0};
  agent::LocalClientsSource source_{registry_, clock_,
                                    [this](const agent::WindowDrops& d) { dropped_ += d.client_buffer_events; }};
  std::unique_ptr<boost::asio::io_context> io_;
  std::unique_ptr<Work> work_;
  std::unique_ptr<agent::LocalSocketServer> server_;
  std::thread thread_;
  std::mutex mu_;
  std::map<int32_t, std::vector<local::StepMsg>> steps_;
};

}  // namespace podscope::testing
