#include "agent/collectors/loadavg_collector.h"

namespace podscope::agent {

absl::Status parse_loadavg(std::string_view text, std::string_view path, std::array<double, 3>& load) {
  std::string_view line, field;
  next_line(text, line);
  for (size_t i = 0; i < load.size(); ++i) {
    if (!next_field(line, field)) {
      return parse_error(path, 1, "expected 3 load averages, got " + std::to_string(i) + " (truncated?)");
    }
    if (!parse_number(field, load[i])) {
      return parse_error(path, 1,
                         "load average " + std::to_string(i + 1) + " is not a number: '" + std::string(field) + "'");
    }
  }
  return absl::OkStatus();
}

LoadAvgCollector::LoadAvgCollector(std::string path) : ProcFileCollector(std::move(path)) {}

absl::Status LoadAvgCollector::record(std::string_view text, int64_t now_ns, SampleSink& sink) {
  std::array<double, 3> load{};
  if (absl::Status s = parse_loadavg(text, path(), load); !s.ok()) return s;
  if (!declared_) {
    constexpr std::array<std::string_view, 3> kNames = {"podscope_load1", "podscope_load5", "podscope_load15"};
    constexpr std::array<std::string_view, 3> kMinutes = {"1", "5", "15"};
    for (size_t i = 0; i < 3; ++i) {
      ids_[i] =
          sink.declare({.metric = std::string(kNames[i]), .help = std::string(kMinutes[i]) + "-minute load average."});
    }
    declared_ = true;
  }
  for (size_t i = 0; i < 3; ++i) sink.record(ids_[i], now_ns, load[i]);
  return absl::OkStatus();
}

}  // namespace podscope::agent
