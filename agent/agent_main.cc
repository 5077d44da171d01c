// podscope-agent: parses options, builds the Agent, starts it, relays signals (SIGTERM/SIGINT: graceful stop;
// SIGHUP: reload the config) and tells systemd about it. Everything else lives in agent.cc.
#include <iostream>

#include "agent/agent.h"
#include "agent/agent_config.h"
#include "daemon/heap.h"
#include "daemon/log.h"
#include "daemon/open_file_limit.h"
#include "daemon/options.h"
#include "daemon/signals.h"
#include "daemon/systemd_notify.h"
#include "tls/tls_config.h"

namespace {
constexpr std::string_view kProgram = "podscope-agent";

// Declares and applies the options afresh; the error (naming file:line or the key) when the config is invalid.
absl::StatusOr<podscope::agent::AgentConfig> reread_config(const podscope::CommandLine& command_line) {
  podscope::agent::AgentConfig config;
  podscope::OptionSet options;
  podscope::agent::declare_agent_options(config, options);
  if (absl::Status s = podscope::apply_command_line(command_line, options); !s.ok()) return s;
  if (absl::Status s = podscope::tls::check_tls_config(config.tls); !s.ok()) return s;
  if (absl::Status s = podscope::tls::check_tls_files(config.tls); !s.ok()) return s;
  return config;
}
}  // namespace

int main(int argc, char** argv) {
  const podscope::ShutdownSignals signals;  // before any thread starts, so every thread inherits the mask
  podscope::keep_heap_thresholds();

  podscope::agent::AgentConfig config;
  podscope::OptionSet options;
  podscope::agent::declare_agent_options(config, options);
  const podscope::ParseOutcome parsed = podscope::parse_command_line(
      argc, argv, options, kProgram,
      "podscope-agent: host collectors, Prometheus exporter and a TensorFlow-compatible profiler service",
      PODSCOPE_VERSION);
  if (parsed.kind == podscope::ParseOutcome::kExit) return parsed.exit_code;
  absl::StatusOr<podscope::LogLevel> level = podscope::parse_log_level(config.log_level);
  if (!level.ok()) {
    std::cerr << kProgram << ": log_level: " << level.status().message() << "\n";
    return 2;
  }
  podscope::set_log_level(*level);

  // Before the Agent, whose channels are built from the TLS keys.
  absl::Status tls = podscope::tls::check_tls_config(config.tls);
  if (tls.ok()) tls = podscope::tls::check_tls_files(config.tls);
  if (!tls.ok()) {
    std::cerr << kProgram << ": " << tls.message() << "\n";
    return 2;
  }

  podscope::raise_open_file_limit();
  podscope::agent::Agent agent(config);
  if (absl::Status s = agent.start(); !s.ok()) {
    // What stops a start is the configuration: a port in use, a socket path or group that cannot be had.
    std::cerr << kProgram << ": " << s.message() << "\n";
    return 2;
  }
  const podscope::SystemdNotifier systemd;
  if (systemd.watchdog_interval().count() > 0) {
    // Pinged from the io_context while the gRPC port passes its self-check: a wedged event loop or a port that no
    // longer accepts connections stops the pings, and systemd restarts the agent.
    agent.every(systemd.watchdog_interval(), [&systemd, &agent] {
      if (!agent.grpc_wedged()) systemd.watchdog();
    });
  }
  const std::string ready = "serving grpc port " + std::to_string(agent.grpc_port()) + ", metrics port " +
                            std::to_string(agent.metrics_port());
  systemd.ready(ready);

  for (;;) {
    const int signal = signals.wait();
    if (signal != SIGHUP) {
      PODSCOPE_LOG(kInfo) << "signal " << signal << ": shutting down";
      break;
    }
    systemd.reloading();
    if (absl::StatusOr<podscope::agent::AgentConfig> fresh = reread_config(parsed.command_line); fresh.ok()) {
      agent.reload(*fresh);
    } else {
      agent.refuse_reload(std::string(fresh.status().message()));
    }
    systemd.ready(ready);
  }
  systemd.stopping();
  agent.shutdown();
  PODSCOPE_LOG(kInfo) << "stopped";
  return 0;
}
