// The on-demand trace request the daemon hands a polling Kineto process: Kineto's config text (KEY=VALUE lines),
// and where the process will write its trace.
#pragma once

#include <cstdint>
#include <string>

namespace podscope::kineto::ipc {

struct OnDemandTrace {
  std::string log_file;       // ACTIVITIES_LOG_FILE: Kineto after torch 2.13 takes it only under /tmp/ or the
                              // process's KINETO_ONDEMAND_TRACE_DIR; torch 2.13 anywhere
  int64_t start_unix_ms = 0;  // PROFILE_START_TIME, on the host's system clock
  int64_t duration_ms = 0;    // ACTIVITIES_DURATION_MSECS
  std::string trace_id;       // REQUEST_TRACE_ID: written into the trace as "trace_id"
};

// The config text. Besides the request's keys it sets ACTIVITIES_WARMUP_PERIOD_SECS=0 (Kineto otherwise refuses
// a start less than its 5 s default warm-up away) and PROFILE_REPORT_INPUT_SHAPES=true (collectives' message
// sizes come from their inputs' shapes).
std::string on_demand_config_text(const OnDemandTrace& trace);

// The file Kineto writes for `log_file`: it inserts "_<pid>" before ".pt.trace.json", else before ".json", so
// that the processes of one request do not overwrite each other. It writes "<file>.tmp" first and renames it.
std::string delivered_trace_path(const std::string& log_file, int32_t pid);

}  // namespace podscope::kineto::ipc
