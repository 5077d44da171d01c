#include "kineto/ipc/on_demand_config.h"

#include <string_view>

namespace podscope::kineto::ipc {

std::string on_demand_config_text(const OnDemandTrace& trace) {
  std::string text;
  text += "ACTIVITIES_LOG_FILE=" + trace.log_file + "\n";
  text += "PROFILE_START_TIME=" + std::to_string(trace.start_unix_ms) + "\n";
  text += "ACTIVITIES_DURATION_MSECS=" + std::to_string(trace.duration_ms) + "\n";
  text += "ACTIVITIES_WARMUP_PERIOD_SECS=0\n";
  text += "PROFILE_REPORT_INPUT_SHAPES=true\n";
  text += "REQUEST_TRACE_ID=" + trace.trace_id + "\n";
  return text;
}

std::string delivered_trace_path(const std::string& log_file, int32_t pid) {
  std::string suffix = "_";
  suffix += std::to_string(pid);
  for (std::string_view ending : {std::string_view(".pt.trace.json"), std::string_view(".json")}) {
    const size_t at = log_file.find(ending);
    if (at != std::string::npos) return log_file.substr(0, at) + suffix + log_file.substr(at);
  }
  return log_file;
}

}  // namespace podscope::kineto::ipc
