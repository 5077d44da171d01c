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

LoadAvgCollector::LoadAvgCollector(std::string path) : file_(std::move(path)) {}

void LoadAvgCollector::sample(int64_t now_ns, SampleSink& sink) {
  std::string_view text;
  if (absl::Status s = file_.read(text); !s.ok()) {
    state_.set(absl::IsNotFound(s) ? CollectorState::State::kUnavailable : CollectorState::State::kDegraded,
               std::string(s.message()));
    return;
  }
  std::array<double, 3> load{};
  if (absl::Status s = parse_loadavg(text, file_.path(), load); !s.ok()) {
    state_.set(CollectorState::State::kDegraded, std::string(s.message()));
    return;
  }
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
  state_.set(CollectorState::State::kOk);
}

}  // namespace podscope::agent
