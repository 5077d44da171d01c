// LoadAvgCollector: /proc/loadavg — the 1, 5 and 15 minute load averages.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "agent/collectors/proc_file_collector.h"
#include "agent/collectors/proc_text.h"

namespace podscope::agent {

absl::Status parse_loadavg(std::string_view text, std::string_view path, std::array<double, 3>& load);

class LoadAvgCollector final : public ProcFileCollector {
 public:
  explicit LoadAvgCollector(std::string path = "/proc/loadavg");
  std::string_view name() const override { return "loadavg"; }

 private:
  absl::Status record(std::string_view text, int64_t now_ns, SampleSink& sink) override;
  bool declared_ = false;
  std::array<SeriesId, 3> ids_{};
};

}  // namespace podscope::agent
