// CpuCollector: /proc/stat per core, in node_exporter's modes (seconds per mode as counters) plus the
// utilization of each core and of the whole host over the last period, derived from the deltas.
#pragma once

#include <array>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "agent/collectors/proc_file_collector.h"
#include "agent/collectors/proc_text.h"

namespace podscope::agent {

// Jiffies per mode in node_exporter's order; guest time is already included in user and nice by the kernel.
inline constexpr std::array<std::string_view, 8> kCpuModes = {"user",   "nice", "system",  "idle",
                                                              "iowait", "irq",  "softirq", "steal"};
struct CpuTimes {
  int cpu = -1;  // core index; -1 for the "cpu" total line
  std::array<uint64_t, 8> jiffies{};
  uint64_t total() const;
  uint64_t idle() const { return jiffies[3] + jiffies[4]; }  // idle + iowait: not doing work
};

// Parses /proc/stat text: the total line and one entry per "cpuN" line (vector reused between calls).
absl::Status parse_proc_stat(std::string_view text, std::string_view path, CpuTimes& total,
                             std::vector<CpuTimes>& cores);

class CpuCollector final : public ProcFileCollector {
 public:
  explicit CpuCollector(std::string path = "/proc/stat");
  std::string_view name() const override { return "cpu"; }

  // Busy and total jiffies of the whole host at the last pass (Monitor derives utilization from two).
  struct Totals {
    uint64_t busy = 0, total = 0;
    int cores = 0;
  };
  Totals totals() const;

 private:
  absl::Status record(std::string_view text, int64_t now_ns, SampleSink& sink) override;
  struct Core {
    int cpu = -1;
    std::array<SeriesId, 8> seconds{};
    SeriesId utilization = 0;
    CpuTimes previous;
    bool has_previous = false;
  };
  void declare_core(Core& core, SampleSink& sink);

  double seconds_per_jiffy_;
  CpuTimes total_;
  std::vector<CpuTimes> parsed_;
  std::vector<Core> cores_;
  SeriesId host_utilization_ = 0;
  bool host_declared_ = false;
  CpuTimes previous_total_;
  bool has_previous_total_ = false;
  mutable std::mutex totals_mu_;
  Totals totals_;
};

}  // namespace podscope::agent
