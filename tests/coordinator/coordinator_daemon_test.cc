// podscope-coordinator as its daemon runs it, in process: it stops within the unit's TimeoutStopSec whatever it was
// doing — a pod capture in progress, and a clock-sync round over workers that never answer.
#include "coordinator/coordinator_daemon.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "pod_capture/remote_capture.h"
#include "tests/pod_capture/lightweight_agent.h"
#include "tests/pod_capture/silent_hosts.h"
#include "tests/scratch_directory.h"

namespace podscope::coordinator {
namespace {

TEST(CoordinatorDaemon, StopsPromptlyDuringALongCaptureAndAClockRoundOverWorkersThatNeverAnswer) {
  // Before, the coordinator took 47 s to stop: shutdown waited for the capture's calls and the clock tracker's round.
  testing::TimerThread timers;
  testing::LightweightAgent live({.host_name = "live"}, timers);
  const testing::SilentHosts silent;
  CoordinatorConfig config;
  config.listen = "127.0.0.1:0";
  config.metrics_listen = "127.0.0.1:0";
  config.clock_sync_interval_ms = 100;
  config.workers = {"live=" + live.address()};
  int i = 0;
  for (const std::string& host : silent.hosts(500))
    config.workers.push_back("silent" + std::to_string(i++) + "=" + host);
  CoordinatorDaemon daemon(config);
  ASSERT_TRUE(daemon.start().ok());
  const std::string address = "127.0.0.1:" + std::to_string(daemon.grpc_port());

  std::atomic<bool> stopped{false};
  std::thread capture([&address, &stopped] {
    podscope::v1::CaptureRequest request;
    request.add_hosts("live");
    request.set_duration_ms(20'000);  // the lightweight agent answers it whole before it goes
    const testing::ScratchDirectory logdir("coord_daemon_stop");
    // Refused until the first clock round has found the live worker up.
    for (int attempt = 0; attempt < 100; ++attempt) {
      const auto outcome = pod_capture::capture_through_coordinator(address, grpc::InsecureChannelCredentials(),
                                                                    request, logdir.path(), [](const std::string&) {});
      if (!outcome.ok() && absl::IsFailedPrecondition(outcome.status()) && !stopped) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        continue;
      }
      EXPECT_FALSE(outcome.ok()) << "a 20 s capture cut off by the stop";
      if (!outcome.ok()) std::printf("the capture's answer: %s\n", std::string(outcome.status().message()).c_str());
      return;
    }
  });
  // The capture is under way once the agent was asked to profile.
  for (int wait = 0; wait < 300 && live.profile_calls() == 0; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(live.profile_calls(), 0);
  const auto stopping = std::chrono::steady_clock::now();
  daemon.shutdown();
  stopped = true;
  const double stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopping).count();
  capture.join();
  const double answered_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopping).count();
  std::printf(
      "coordinator stopped %.1f s after shutdown began (its capture answered at %.1f s), a 20 s capture and "
      "%d silent workers under way\n",
      stop_s, answered_s, 500);
  EXPECT_LT(stop_s, 10) << "the unit's TimeoutStopSec";
  EXPECT_LT(answered_s, 10);
}

}  // namespace
}  // namespace podscope::coordinator
