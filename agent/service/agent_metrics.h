// The agent's own Prometheus metrics: podscope_build_info and the request counters the gRPC services bump. The
// registry is served on --metrics_listen by the daemons' MetricsServer (daemon/metrics_server.h).
#pragma once

#include <string>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

namespace podscope::agent {

struct RequestMetrics {
  RequestMetrics(prometheus::Registry& registry, const std::string& host_name);
  prometheus::Counter& captures_served;
  prometheus::Counter& captures_refused;
  prometheus::Counter& monitors_refused;        // over max_concurrent_monitors
  prometheus::Counter& reloads_refused;         // SIGHUP with an invalid config
  prometheus::Counter& reload_options_refused;  // changed options a valid reload left as they run (need a restart)
  prometheus::Counter& monitors_served;
  prometheus::Counter& pod_sessions_served;        // NewSession pod runs
  prometheus::Counter& fanouts_refused;            // NewSession naming a host outside allowed_fanout_targets
  prometheus::Counter& heap_returned;              // bytes handed back to the system after large answers (raw_answer.h)
  prometheus::Counter& answers_refused;            // over AnswerThreads' bound (raw_answer.h)
  prometheus::Counter& upstream_answers_refused;   // over their share of capture_memory_limit_mb
  prometheus::Counter& repository_writes_refused;  // over repository_quota_mb
  prometheus::Counter& interrupted_writes_removed;  // temporary files of atomic writes a crash cut off, at start
  prometheus::Counter& interrupted_writes_removed_bytes;
};

void register_build_info(prometheus::Registry& registry, const std::string& host_name, const std::string& version);

}  // namespace podscope::agent
