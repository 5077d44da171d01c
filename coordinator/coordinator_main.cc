// podscope-coordinator: parses options, starts the CoordinatorDaemon, waits for SIGTERM/SIGINT, tells systemd.
#include <iostream>

#include "coordinator/coordinator_daemon.h"
#include "daemon/log.h"
#include "daemon/open_file_limit.h"
#include "daemon/options.h"
#include "daemon/signals.h"
#include "daemon/systemd_notify.h"

int main(int argc, char** argv) {
  const podscope::ShutdownSignals signals;  // before any thread starts
  podscope::coordinator::CoordinatorConfig config;
  podscope::OptionSet options;
  podscope::coordinator::declare_coordinator_options(config, options);
  const podscope::ParseOutcome parsed = podscope::parse_command_line(
      argc, argv, options, "podscope-coordinator",
      "podscope-coordinator: agent registry, clock sync and synchronized pod captures", PODSCOPE_VERSION);
  if (parsed.kind == podscope::ParseOutcome::kExit) return parsed.exit_code;
  auto level = podscope::parse_log_level(config.log_level);
  if (!level.ok()) {
    std::cerr << "podscope-coordinator: log_level: " << level.status().message() << "\n";
    return 2;
  }
  podscope::set_log_level(*level);
  podscope::raise_open_file_limit();
  podscope::coordinator::CoordinatorDaemon daemon(config);
  if (auto status = daemon.start(); !status.ok()) {
    std::cerr << "podscope-coordinator: " << status.message() << "\n";
    return 2;
  }
  const podscope::SystemdNotifier systemd;
  systemd.ready("serving grpc port " + std::to_string(daemon.grpc_port()));
  // Under a WatchdogSec the main thread pings while the gRPC port passes its self-check, as the agent does: a port
  // that no longer accepts connections stops the pings, and systemd restarts the coordinator.
  const std::chrono::milliseconds watchdog = systemd.watchdog_interval();
  // SIGHUP has nothing to reload beyond what a restart does; it is logged and ignored.
  while (true) {
    const int signal = watchdog.count() > 0 ? signals.wait_for(watchdog) : signals.wait();
    if (signal == 0) {
      if (daemon.serving()) systemd.watchdog();
      continue;
    }
    if (signal != SIGHUP) break;
    PODSCOPE_LOG(kInfo) << "SIGHUP ignored: restart the coordinator to change its options";
  }
  systemd.stopping();
  daemon.shutdown();
  PODSCOPE_LOG(kInfo) << "stopped";
  return 0;
}
