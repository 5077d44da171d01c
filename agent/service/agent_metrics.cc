#include "agent/service/agent_metrics.h"

#include <prometheus/gauge.h>

#include "daemon/host_metrics.h"

namespace podscope::agent {

RequestMetrics::RequestMetrics(prometheus::Registry& registry, const std::string& host_name)
    : captures_served(
          host_counter(registry, host_name, "podscope_captures_total", "Profile requests answered with a capture.")),
      captures_refused(host_counter(registry, host_name, "podscope_capture_errors_total",
                                    "Profile requests refused (invalid, one already running, shutting down).")),
      monitors_refused(host_counter(registry, host_name, "podscope_monitor_errors_total",
                                    "Monitor requests refused because max_concurrent_monitors were in flight.")),
      reloads_refused(
          host_counter(registry, host_name, "podscope_config_reload_errors_total",
                       "SIGHUP reloads refused because the config was invalid (the running config stays).")),
      reload_options_refused(host_counter(registry, host_name, "podscope_config_reload_options_refused_total",
                                          "Changed options a SIGHUP reload refused, keeping their running value, "
                                          "because they take effect only after a restart (each is named in the log).")),
      monitors_served(host_counter(registry, host_name, "podscope_monitors_total", "Monitor requests answered.")),
      pod_sessions_served(
          host_counter(registry, host_name, "podscope_pod_sessions_total",
                       "NewSession requests answered with a pod run (TensorBoard's worker-list capture).")),
      fanouts_refused(host_counter(
          registry, host_name, "podscope_fanout_refused_total",
          "NewSession requests refused, nothing contacted, because a host was outside allowed_fanout_targets.")),
      heap_returned(host_counter(registry, host_name, "podscope_heap_returned_bytes_total",
                                 "Resident memory handed back to the system once a large answer (a capture, a recorded "
                                 "window) was sent: glibc would keep it for reuse.")),
      answers_refused(host_counter(registry, host_name, "podscope_answers_refused_total",
                                   "Profile, GetSnapshot and GetRecordedWindow calls refused because as many were "
                                   "already being answered as there are threads for them (kMaxAnswerThreads).")),
      upstream_answers_refused(host_family<prometheus::Counter>(
                                   registry, host_name, "podscope_capture_inputs_refused_total",
                                   "What a capture's sources received and dropped because it did not fit their share "
                                   "of capture_memory_limit_mb (each said in the capture's warnings), by source.")
                                   .Add({{"source", "upstream"}})),
      repository_writes_refused(
          host_counter(registry, host_name, "podscope_repository_writes_refused_total",
                       "Captures and pod runs not written under repository_root because the tree already holds "
                       "repository_quota_mb (said in the capture's warnings or the NewSession's error).")),
      interrupted_writes_removed(host_counter(registry, host_name, "podscope_interrupted_writes_removed_total",
                                              "Temporary files of atomic writes that a crash or kill cut off, found "
                                              "and removed under repository_root at start.")),
      interrupted_writes_removed_bytes(host_counter(registry, host_name,
                                                    "podscope_interrupted_writes_removed_bytes_total",
                                                    "Bytes those temporary files held.")) {}

void register_build_info(prometheus::Registry& registry, const std::string& host_name, const std::string& version) {
  host_family<prometheus::Gauge>(registry, host_name, "podscope_build_info",
                                 "Always 1; the labels say which podscope-agent build runs.")
      .Add({{"version", version}})
      .Set(1);
}

}  // namespace podscope::agent
