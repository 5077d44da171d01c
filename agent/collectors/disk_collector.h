// DiskCollector: /proc/diskstats per whole device (partitions, loop and ram devices skipped, as
// node_exporter does) — reads, writes, bytes read and written, time spent doing I/O.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "agent/collectors/proc_file_collector.h"
#include "agent/collectors/proc_text.h"

namespace podscope::agent {

struct DiskCounters {
  std::string_view device;  // points into the parsed text
  // reads completed, writes completed, bytes read, bytes written, seconds doing I/O
  std::array<double, 5> values{};
};

// Whether a /proc/diskstats device is left out (partitions, loop, ram, floppy).
bool is_ignored_disk(std::string_view device);

absl::Status parse_diskstats(std::string_view text, std::string_view path, std::vector<DiskCounters>& out);

class DiskCollector final : public ProcFileCollector {
 public:
  explicit DiskCollector(std::string path = "/proc/diskstats");
  std::string_view name() const override { return "disk"; }

 private:
  absl::Status record(std::string_view text, int64_t now_ns, SampleSink& sink) override;
  std::vector<DiskCounters> parsed_;
  SeriesByName<5> devices_;
};

}  // namespace podscope::agent
