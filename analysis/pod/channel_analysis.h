// Send/recv-done channels: each send (source core) paired with its recv-done (destination core) by
// channel id, step number and order, on merged clocks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "podscope/v1/step_database.pb.h"
#include "podscope/v1/pod_viewer.pb.h"

namespace podscope::analysis {

// An endpoint of a core's step database (which outlives the analysis of the channels), with its core, its times in
// coordinator time and its sort key (step, channel, side) copied beside them: sorting these moves no names and
// follows no pointers.
struct MergedEndpoint {
  uint32_t core_id = 0;
  bool is_send = false;
  int64_t step_num = 0;
  int64_t channel_id = 0;
  const podscope::v1::ChannelEndpoint* endpoint = nullptr;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// One channel in one step: its sends paired with its recv-dones, in figures. Its ChannelInfo is made only for the
// steps the pod viewer shows (channel_info), most steps being summed and not shown.
struct ChannelSummary {
  int64_t step_num = 0;
  int64_t channel_id = 0;
  double duration_us = 0;  // mean over the pairs
  double send_delay_us = 0;
  uint32_t occurrences = 0;
  uint64_t data_size = 0;
  double utilization = 0;
  std::vector<uint32_t> src_cores;      // sorted, once each
  std::vector<uint32_t> dst_cores;      // sorted, once each
  std::vector<std::string_view> names;  // sorted, once each; views into the step database
};

podscope::v1::ChannelInfo channel_info(const ChannelSummary& summary);

struct ChannelResult {
  std::vector<ChannelSummary> channels;  // by step, then channel id
  uint32_t unpaired_sends = 0;
  uint32_t unpaired_recv_dones = 0;
  uint32_t negative_durations = 0;
  // One line per negative duration (the first few), naming channel, step, cores and value.
  std::vector<std::string> warnings;
};

ChannelResult analyze_channels(std::vector<MergedEndpoint> endpoints, double peak_link_bandwidth_bytes_per_s);

}  // namespace podscope::analysis
