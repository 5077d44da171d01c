// HostSeriesSource: the agent's sampled series during a capture window, as counter tracks on the `_counters_`
// line of each series' plane (counters become per-second rates), the `/host:CPU` plane's stats describing the
// host (cores, memory size, host name), and an XSpace warning for every collector not OK.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/capture/capture_source.h"
#include "agent/collectors/collector.h"
#include "agent/series/series_store.h"

namespace podscope::agent {

struct HostDescription {
  std::string host_name;
  int64_t core_count = 0;
  int64_t memory_size_bytes = 0;
  static HostDescription of_this_host(std::string host_name);
};

class HostSeriesSource final : public CaptureSource {
 public:
  HostSeriesSource(const SeriesStore& series, HostDescription host, std::vector<const Collector*> collectors);
  std::string_view name() const override { return "host series"; }
  void open(const CaptureWindow& window) override;
  void close(int64_t end_ns) override;
  void collect(CaptureSpace& out) override;

 private:
  const SeriesStore& series_;
  HostDescription host_;
  std::vector<const Collector*> collectors_;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
};

}  // namespace podscope::agent
