#include "agent/service/agent_metrics.h"

#include <prometheus/gauge.h>

namespace podscope::agent {

RequestMetrics::RequestMetrics(prometheus::Registry& registry, const std::string& host_name)
    : captures_served(prometheus::BuildCounter()
                          .Name("podscope_captures_total")
                          .Help("Profile requests answered with a capture.")
                          .Labels({{"host", host_name}})
                          .Register(registry)
                          .Add({})),
      captures_refused(prometheus::BuildCounter()
                           .Name("podscope_capture_errors_total")
                           .Help("Profile requests refused (invalid, one already running, shutting down).")
                           .Labels({{"host", host_name}})
                           .Register(registry)
                           .Add({})),
      monitors_refused(prometheus::BuildCounter()
                           .Name("podscope_monitor_errors_total")
                           .Help("Monitor requests refused because max_concurrent_monitors were in flight.")
                           .Labels({{"host", host_name}})
                           .Register(registry)
                           .Add({})),
      reloads_refused(prometheus::BuildCounter()
                          .Name("podscope_config_reload_errors_total")
                          .Help("SIGHUP reloads refused because the config was invalid (the running config stays).")
                          .Labels({{"host", host_name}})
                          .Register(registry)
                          .Add({})),
      reload_options_refused(prometheus::BuildCounter()
                                 .Name("podscope_config_reload_options_refused_total")
                                 .Help("Changed options a SIGHUP reload refused, keeping their running value, because "
                                       "they take effect only after a restart (each is named in the log).")
                                 .Labels({{"host", host_name}})
                                 .Register(registry)
                                 .Add({})),
      monitors_served(prometheus::BuildCounter()
                          .Name("podscope_monitors_total")
                          .Help("Monitor requests answered.")
                          .Labels({{"host", host_name}})
                          .Register(registry)
                          .Add({})),
      pod_sessions_served(prometheus::BuildCounter()
                              .Name("podscope_pod_sessions_total")
                              .Help("NewSession requests answered with a pod run (TensorBoard's worker-list capture).")
                              .Labels({{"host", host_name}})
                              .Register(registry)
                              .Add({})),
      fanouts_refused(prometheus::BuildCounter()
                          .Name("podscope_fanout_refused_total")
                          .Help("NewSession requests refused, nothing contacted, because a host was outside "
                                "allowed_fanout_targets.")
                          .Labels({{"host", host_name}})
                          .Register(registry)
                          .Add({})),
      heap_returned(prometheus::BuildCounter()
                        .Name("podscope_heap_returned_bytes_total")
                        .Help("Resident memory handed back to the system once a large answer (a capture, a recorded "
                              "window) was sent: glibc would keep it for reuse.")
                        .Labels({{"host", host_name}})
                        .Register(registry)
                        .Add({})),
      answers_refused(prometheus::BuildCounter()
                          .Name("podscope_answers_refused_total")
                          .Help("Profile, GetSnapshot and GetRecordedWindow calls refused because as many were "
                                "already being answered as there are threads for them (kMaxAnswerThreads).")
                          .Labels({{"host", host_name}})
                          .Register(registry)
                          .Add({})),
      upstream_answers_refused(prometheus::BuildCounter()
                                   .Name("podscope_capture_inputs_refused_total")
                                   .Help("What a capture's sources received and dropped because it did not fit their "
                                         "share of capture_memory_limit_mb (each said in the capture's warnings), by "
                                         "source.")
                                   .Labels({{"host", host_name}})
                                   .Register(registry)
                                   .Add({{"source", "upstream"}})),
      repository_writes_refused(prometheus::BuildCounter()
                                    .Name("podscope_repository_writes_refused_total")
                                    .Help("Captures and pod runs not written under repository_root because the tree "
                                          "already holds repository_quota_mb (said in the capture's warnings or the "
                                          "NewSession's error).")
                                    .Labels({{"host", host_name}})
                                    .Register(registry)
                                    .Add({})),
      interrupted_writes_removed(prometheus::BuildCounter()
                                     .Name("podscope_interrupted_writes_removed_total")
                                     .Help("Temporary files of atomic writes that a crash or kill cut off, found and "
                                           "removed under repository_root at start.")
                                     .Labels({{"host", host_name}})
                                     .Register(registry)
                                     .Add({})),
      interrupted_writes_removed_bytes(prometheus::BuildCounter()
                                           .Name("podscope_interrupted_writes_removed_bytes_total")
                                           .Help("Bytes those temporary files held.")
                                           .Labels({{"host", host_name}})
                                           .Register(registry)
                                           .Add({})) {}

void register_build_info(prometheus::Registry& registry, const std::string& host_name, const std::string& version) {
  prometheus::BuildGauge()
      .Name("podscope_build_info")
      .Help("Always 1; the labels say which podscope-agent build runs.")
      .Labels({{"host", host_name}})
      .Register(registry)
      .Add({{"version", version}})
      .Set(1);
}

}  // namespace podscope::agent
