// AgentConfig: every setting of podscope-agent, declared once (YAML key == flag name) in
// declare_agent_options. Each subsystem's keys are in a block of their own below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/local/local_socket_policy.h"
#include "daemon/options.h"
#include "tls/tls_config.h"

namespace podscope::agent {

struct AgentConfig {
  // --- core agent ---
  std::string listen = "0.0.0.0:8466";                // gRPC: tensorflow.ProfilerService + podscope.v1.Agent
  std::string metrics_listen = "0.0.0.0:9466";        // Prometheus /metrics
  std::string metrics_web_config;                     // its TLS and basic auth (exporter-toolkit's format); "": none
  std::string host_name;                              // empty: the kernel's host name
  std::string socket = "/run/podscope/agent.sock";    // Unix socket for annotated training processes
  std::string repository_root;                        // empty: captures are returned, never written to disk
  int64_t repository_quota_mb = 4096;                 // what remote requests may write under it
  std::vector<std::string> allowed_repository_roots;  // bucket prefixes a request may name; empty: none
  std::string failed_uploads_directory = "/var/lib/podscope/failed-uploads";
  int64_t sample_interval_ms = 1000;
  int64_t max_duration_ms = 600000;
  int64_t max_request_mb = 4;             // larger gRPC requests are refused (RESOURCE_EXHAUSTED)
  int64_t max_concurrent_monitors = 16;   // Monitor calls in flight beyond this are refused
  int64_t capture_memory_limit_mb = 256;  // bounds a capture's memory: held events, XSpace build and response
  int64_t clock_offset_ns = 0;            // test hook (hidden): shifts every timestamp reported
  std::string log_level = "info";

  // --- flight recorder ---
  int64_t flight_recorder_seconds = 0;         // the rolling window kept of annotated processes' events; 0: off
  int64_t flight_recorder_max_mb = 64;         // its memory cap, snapshots built from it included
  int64_t flight_recorder_max_snapshots = 10;  // triggered snapshots kept in memory, newest
  int64_t flight_recorder_disk_mb = 256;       // triggered snapshots kept under repository_root, newest
  double trigger_step_factor = 2.0;            // a step this many times its process's rolling median triggers
  double trigger_spread_factor = 10.0;         // ... and more than this many MADs above that median
  double trigger_min_excess_ms = 1.0;          // ... and at least this much longer than that median
  int64_t trigger_min_steps = 20;              // steps of a process seen before its median is trusted
  int64_t trigger_warmup_s = 2;                // a process's first seconds trigger nothing
  int64_t trigger_cooldown_s = 60;             // a snapshot of the budget comes back every this long

  // --- local socket ---
  std::string socket_group;                      // group of the 0660 socket (empty: the agent's)
  std::vector<std::string> socket_trusted_uids;  // uids trusted besides root, the agent's and the group's
  LocalSocketLimits socket_limits;               // socket_max_connections[_per_uid], socket_*_timeout_ms

  // --- devices and upstream profiler servers ---
  std::vector<std::string> upstream;                      // framework profiler servers (TF/JAX) to forward captures to
  std::string tpu_metrics_addr = "localhost:8431";        // libtpu's runtime metric service
  std::string kineto_endpoint = "dynolog";                // the IPC fabric endpoint PyTorch's Kineto polls; "": off
  std::string kineto_trace_dir = "/run/podscope/kineto";  // each uid's directory for the traces Kineto delivers

  // --- TensorBoard's worker-list capture (ProfileAnalysis.NewSession) ---
  std::vector<std::string> allowed_fanout_targets;  // host:port patterns; empty: any host on this agent's gRPC port
  int64_t max_fanout_hosts = 4096;                  // hosts one NewSession may list, as the coordinator's max_workers

  // --- coordinator registration ---
  std::string coordinator;  // host:port of podscope-coordinator; empty: do not register
  std::string job;          // reported to the coordinator, which can capture a job's workers by name

  // --- transport security (every gRPC server and channel of the agent) ---
  tls::TlsConfig tls;  // tls_cert, tls_key, tls_client_ca, tls_ca, tls_refresh_s, allowed_clients, plaintext_listen
};

// Declares every key of `config` on `options`; the OptionSet writes straight into `config`.
void declare_agent_options(AgentConfig& config, OptionSet& options);

// The host name captures and metrics report: config.host_name, else the kernel's.
std::string effective_host_name(const AgentConfig& config);

}  // namespace podscope::agent
