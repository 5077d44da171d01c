// NetworkCollector: /proc/net/dev per interface — bytes, packets, errors and drops received and sent.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "agent/collectors/collector.h"
#include "agent/collectors/proc_text.h"

namespace podscope::agent {

struct InterfaceCounters {
  std::string_view name;  // points into the parsed text
  // receive bytes, packets, errs, drop; transmit bytes, packets, errs, drop
  std::array<uint64_t, 8> values{};
};

// Parses /proc/net/dev text into `out` (reused between calls; names point into `text`).
absl::Status parse_net_dev(std::string_view text, std::string_view path, std::vector<InterfaceCounters>& out);

class NetworkCollector final : public Collector {
 public:
  explicit NetworkCollector(std::string path = "/proc/net/dev");
  std::string_view name() const override { return "network"; }
  CollectorState status() const override { return state_.get(); }
  CollectorState::State state() const override { return state_.state(); }
  void sample(int64_t now_ns, SampleSink& sink) override;

 private:
  struct Interface {
    std::string name;
    std::array<SeriesId, 8> ids{};
  };
  ProcFile file_;
  CollectorStateCell state_;
  std::vector<InterfaceCounters> parsed_;
  std::vector<Interface> interfaces_;
};

}  // namespace podscope::agent
