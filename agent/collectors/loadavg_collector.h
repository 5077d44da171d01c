// LoadAvgCollector: /proc/loadavg — the 1, 5 and 15 minute load averages.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "agent/collectors/collector.h"
#include "agent/collectors/proc_text.h"

namespace podscope::agent {

absl::Status parse_loadavg(std::string_view text, std::string_view path, std::array<double, 3>& load);

class LoadAvgCollector final : public Collector {
 public:
  explicit LoadAvgCollector(std::string path = "/proc/loadavg");
  std::string_view name() const override { return "loadavg"; }
  CollectorState status() const override { return state_.get(); }
  CollectorState::State state() const override { return state_.state(); }
  void sample(int64_t now_ns, SampleSink& sink) override;

 private:
  ProcFile file_;
  CollectorStateCell state_;
  bool declared_ = false;
  std::array<SeriesId, 3> ids_{};
};

}  // namespace podscope::agent
