// NetworkCollector: /proc/net/dev per interface — bytes, packets, errors and drops received and sent.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "agent/collectors/proc_file_collector.h"
#include "agent/collectors/proc_text.h"

namespace podscope::agent {

struct InterfaceCounters {
  std::string_view name;  // points into the parsed text
  // receive bytes, packets, errs, drop; transmit bytes, packets, errs, drop
  std::array<uint64_t, 8> values{};
};

// Parses /proc/net/dev text into `out` (reused between calls; names point into `text`).
absl::Status parse_net_dev(std::string_view text, std::string_view path, std::vector<InterfaceCounters>& out);

class NetworkCollector final : public ProcFileCollector {
 public:
  explicit NetworkCollector(std::string path = "/proc/net/dev");
  std::string_view name() const override { return "network"; }

 private:
  absl::Status record(std::string_view text, int64_t now_ns, SampleSink& sink) override;
  std::vector<InterfaceCounters> parsed_;
  SeriesByName<8> interfaces_;
};

}  // namespace podscope::agent
