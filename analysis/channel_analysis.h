// Send/recv-done channels: each send (source core) paired with its recv-done (destination core) by
// channel id, step number and order, on merged clocks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/core_trace.h"
#include "podscope/v1/pod_viewer.pb.h"

namespace podscope::analysis {

// An endpoint of a core's trace (which outlives the analysis of the channels), with its core and its times in
// coordinator time: sorting these moves no names.
struct MergedEndpoint {
  uint32_t core_id = 0;
  const ChannelEndpoint* endpoint = nullptr;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct ChannelResult {
  std::map<int64_t, std::vector<podscope::v1::ChannelInfo>> channels_by_step;
  uint32_t unpaired_sends = 0;
  uint32_t unpaired_recv_dones = 0;
  uint32_t negative_durations = 0;
  // One line per negative duration (the first few), naming channel, step, cores and value.
  std::vector<std::string> warnings;
};

ChannelResult analyze_channels(std::vector<MergedEndpoint> endpoints, double peak_link_bandwidth_bytes_per_s);

}  // namespace podscope::analysis
