#include "agent/agent_config.h"

#include <unistd.h>

#include <climits>

#include "agent/capture/bucket_uploads.h"
#include "agent/capture/fanout_targets.h"
#include "daemon/log.h"
#include "daemon/metrics_server.h"

namespace podscope::agent {

// A reload applies the options declared Reload::kApplied (Agent::reload puts them in force); it refuses a change of
// any other, naming it, and keeps its running value.
void declare_agent_options(AgentConfig& c, OptionSet& o) {
  // --- core agent ---
  o.add_string("listen", &c.listen,
               "gRPC address (tensorflow.ProfilerService, podscope.v1.Agent); port 0 picks a free port");
  o.add_string("metrics_listen", &c.metrics_listen, "Prometheus /metrics address; port 0 picks a free port");
  o.add_string("metrics_web_config", &c.metrics_web_config, kMetricsWebConfigHelp);
  o.add_string("host_name", &c.host_name, "host name reported in captures and metrics (empty: the kernel's)");
  o.add_string("socket", &c.socket, "Unix socket that annotated training processes connect to");
  o.add_string("repository_root", &c.repository_root,
               "directory captures may be written under (empty: never write files, only return data)",
               Reload::kApplied);
  o.add_int("repository_quota_mb", &c.repository_quota_mb,
            "what the captures (Profile) and pod runs (NewSession) that clients ask for may write under "
            "repository_root, and the captures kept in failed_uploads_directory, in MiB, counted since the agent "
            "started (each directory made counts at least 1 MiB; what was deleted since counts no more); past it "
            "nothing more is written, said in the capture and counted",
            1, 1 << 24);
  o.add_list("allowed_repository_roots", &c.allowed_repository_roots,
             "bucket prefixes (gs://bucket/prefix/, s3://bucket/prefix/) a capture request may name as its "
             "repository_root; the agent writes there with its own credentials, so any other bucket root is refused "
             "with PERMISSION_DENIED and an audit line (empty: none)",
             Reload::kApplied);
  o.add_check("allowed_repository_roots", [&c] { return check_repository_roots(c.allowed_repository_roots); });
  o.add_string("failed_uploads_directory", &c.failed_uploads_directory,
               "where a capture whose upload to a bucket failed is kept, for a retry (named in the capture's error)",
               Reload::kApplied);
  o.add_int("sample_interval_ms", &c.sample_interval_ms, "host sampling period in milliseconds", 10, 60000,
            Reload::kApplied);
  o.add_int("max_duration_ms", &c.max_duration_ms, "longest capture or monitor a client may ask for", 1,
            24LL * 3600 * 1000, Reload::kApplied);
  o.add_int("max_request_mb", &c.max_request_mb,
            "largest gRPC request accepted, in MiB (ours and TensorFlow's are a few KiB); larger: RESOURCE_EXHAUSTED",
            1, 2047);
  o.add_int(
      "max_concurrent_monitors", &c.max_concurrent_monitors,
      "Monitor calls served at once; more are refused with RESOURCE_EXHAUSTED so that Profile always has a thread", 1,
      1024);
  o.add_int("capture_memory_limit_mb", &c.capture_memory_limit_mb,
            "memory one capture may take, in MiB: its events, their XSpace and the response; past it whole steps are "
            "dropped (each client keeps its earliest and latest), counted in the capture's warnings and metrics",
            16, 1 << 20, Reload::kApplied);
  o.add_int("clock_offset_ns", &c.clock_offset_ns, "test hook: shifts every timestamp this agent reports",
            -LLONG_MAX / 4, LLONG_MAX / 4);
  o.hide("clock_offset_ns");
  o.add_string("log_level", &c.log_level, "debug, info, warning or error", Reload::kApplied);
  o.add_check("log_level", [&c] { return parse_log_level(c.log_level).status(); });

  // --- flight recorder ---
  o.add_int("flight_recorder_seconds", &c.flight_recorder_seconds,
            "seconds of annotated processes' events the agent keeps, always, so that the past can be captured "
            "(podscope capture --last_ms, GetSnapshot); 0: off",
            0, 3600);
  o.add_int("flight_recorder_max_mb", &c.flight_recorder_max_mb,
            "memory the flight recorder may take, in MiB, snapshots built from it included; past it the oldest "
            "events are dropped and counted. Separate from capture_memory_limit_mb: the agent's event memory is at "
            "most their sum",
            1, 1 << 20);
  o.add_int("flight_recorder_max_snapshots", &c.flight_recorder_max_snapshots,
            "triggered snapshots kept in memory, compressed (together at most flight_recorder_max_mb); past it the "
            "oldest is deleted and counted",
            1, 1000);
  o.add_int("flight_recorder_disk_mb", &c.flight_recorder_disk_mb,
            "disk triggered snapshots may take under repository_root, in MiB; past it the oldest are deleted and "
            "counted (no repository_root: none are written)",
            1, 1 << 20);
  o.add_double("trigger_step_factor", &c.trigger_step_factor,
               "a step of an annotated process slow enough (see trigger_spread_factor) and longer than this many "
               "times the median of its recent steps freezes the flight recorder's window as a snapshot",
               1.01, 1000);
  o.add_double("trigger_spread_factor", &c.trigger_spread_factor,
               "a slow step is also longer than the median of its process's recent steps plus this many times their "
               "median absolute deviation, so that steps that vary by nature do not trigger",
               0, 1000);
  o.add_double("trigger_min_excess_ms", &c.trigger_min_excess_ms,
               "a slow step is also at least this many milliseconds longer than the median of its process's recent "
               "steps: a stall of a step of well under a millisecond (one preemption) passes both factors",
               0, 1e6);
  o.add_int("trigger_min_steps", &c.trigger_min_steps,
            "steps of a process the agent must have seen before one of them can trigger a snapshot", 3, 100000);
  o.add_int("trigger_warmup_s", &c.trigger_warmup_s,
            "seconds after a process's first step (as the agent sees it) during which its steps trigger nothing: "
            "start-up steps are slow for reasons of their own",
            0, 24 * 3600);
  o.add_int("trigger_cooldown_s", &c.trigger_cooldown_s,
            "one snapshot of the budget of 3 comes back every this many seconds; past the budget a slow step "
            "freezes one only when it is twice as slow, relative to its median, as every slow step of the last this "
            "many seconds (0: every slow step does)",
            0, 24 * 3600);

  // --- local socket ---
  o.add_string("socket_group", &c.socket_group,
               "group that owns the 0660 socket; its members may annotate (empty: the agent's group)");
  o.add_check("socket_group", [&c] { return socket_group_id(c.socket_group).status(); });
  o.add_list("socket_trusted_uids", &c.socket_trusted_uids,
             "uids whose processes may annotate, besides root, the agent's uid and socket_group members");
  o.add_check("socket_trusted_uids", [&c] { return parse_trusted_uids(c.socket_trusted_uids).status(); });
  LocalSocketLimits& limits = c.socket_limits;
  o.add_int("socket_max_connections", &limits.max_connections,
            "local socket connections open at once; beyond, a connection is closed at accept and counted", 1, 65536);
  o.add_int("socket_max_connections_per_uid", &limits.max_connections_per_uid,
            "local socket connections open at once from one uid; beyond, closed at accept and counted", 1, 65536);
  o.add_int("socket_handshake_timeout_ms", &limits.handshake_timeout_ms,
            "a local connection that has not registered this long after accept is closed and counted", 10, 3600 * 1000);
  o.add_int("socket_frame_timeout_ms", &limits.frame_timeout_ms,
            "a registered client's frame not whole this long after its header is closed and counted (a client quiet "
            "between frames is never closed)",
            10, 3600 * 1000);

  // --- devices and upstream profiler servers ---
  o.add_list("upstream", &c.upstream,
             "host:port[,host:port] of framework profiler servers (TF/JAX) whose traces each capture merges");
  o.add_string("tpu_metrics_addr", &c.tpu_metrics_addr, "libtpu runtime metric service address (host:port)");
  o.add_string("kineto_endpoint", &c.kineto_endpoint,
               "where PyTorch processes started with KINETO_USE_DAEMON=1 poll for trace requests: a name (abstract "
               "socket, Kineto's default 'dynolog') or an absolute path <dir>/dynolog (a socket file, for processes "
               "with KINETO_IPC_SOCKET_DIR=<dir>); empty: off");
  o.add_string("kineto_trace_dir", &c.kineto_trace_dir,
               "the directory (absolute; made by the agent, mode 0711) under which each uid's PyTorch processes get "
               "a directory only they and the agent may write, for the traces a capture asks of them; Kineto's "
               "recent releases write on-demand traces only under /tmp or the process's KINETO_ONDEMAND_TRACE_DIR, "
               "which must then name this directory or one above it");

  // --- TensorBoard's worker-list capture (ProfileAnalysis.NewSession) ---
  o.add_list("allowed_fanout_targets", &c.allowed_fanout_targets,
             "host:port patterns ('*' matches any run of characters) of the hosts a NewSession on this agent may "
             "capture: address patterns (digits, dots, '*') match the addresses a host resolves to, name patterns "
             "the whole name ('*' within one label); a request naming any other host is refused, nothing contacted "
             "(empty: any host on this agent's own gRPC port)");
  o.add_int("max_fanout_hosts", &c.max_fanout_hosts,
            "most hosts one NewSession may list; a longer list is refused with nothing contacted", 1, 1'000'000);
  o.add_check("allowed_fanout_targets", [&c] { return check_fanout_patterns(c.allowed_fanout_targets); });

  // --- coordinator registration ---
  o.add_string("coordinator", &c.coordinator,
               "podscope-coordinator host:port to register and heartbeat with (empty: none)");
  o.add_string("job", &c.job, "job name reported to the coordinator");

  // --- transport security ---
  tls::declare_tls_options(c.tls, o, tls::TlsRole::kDaemon);
}

std::string effective_host_name(const AgentConfig& config) {
  if (!config.host_name.empty()) return config.host_name;
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace podscope::agent
