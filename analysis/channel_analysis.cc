#include "analysis/channel_analysis.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace podscope::analysis {
namespace {

constexpr size_t kMaxWarningLines = 10;

struct Transfer {
  const MergedEndpoint* send;
  const MergedEndpoint* recv;
  int64_t duration_ns;
  int64_t send_delay_ns;
};

}  // namespace

ChannelResult analyze_channels(std::vector<MergedEndpoint> endpoints, double peak_link_bandwidth_bytes_per_s) {
  ChannelResult result;
  std::sort(endpoints.begin(), endpoints.end(),
            [](const MergedEndpoint& a, const MergedEndpoint& b) { return a.endpoint.start_ns < b.endpoint.start_ns; });
  // (step, channel) -> sends and recv-dones in start order.
  std::map<std::pair<int64_t, int64_t>,
           std::pair<std::vector<const MergedEndpoint*>, std::vector<const MergedEndpoint*>>>
      by_channel;
  for (const MergedEndpoint& e : endpoints) {
    auto& sides = by_channel[{e.endpoint.step_num, e.endpoint.channel_id}];
    (e.endpoint.is_send ? sides.first : sides.second).push_back(&e);
  }

  for (const auto& [key, sides] : by_channel) {
    const auto& [sends, recvs] = sides;
    const size_t pairs = std::min(sends.size(), recvs.size());
    result.unpaired_sends += static_cast<uint32_t>(sends.size() - pairs);
    result.unpaired_recv_dones += static_cast<uint32_t>(recvs.size() - pairs);
    if (pairs == 0) continue;

    podscope::v1::ChannelInfo info;
    info.set_channel_id(key.second);
    std::set<uint32_t> src_cores, dst_cores;
    std::set<std::string> names;
    int64_t total_duration = 0, total_delay = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < pairs; ++i) {
      const MergedEndpoint& send = *sends[i];
      const MergedEndpoint& recv = *recvs[i];
      const int64_t duration = recv.endpoint.end_ns - send.endpoint.start_ns;
      const int64_t delay = std::max<int64_t>(0, send.endpoint.start_ns - recv.endpoint.start_ns);
      if (duration < 0) {
        ++result.negative_durations;
        if (result.warnings.size() < kMaxWarningLines) {
          result.warnings.push_back(absl::StrCat("clock merge: channel ", key.second, " step ", key.first,
                                                 " from core ", send.core_id, " to core ", recv.core_id,
                                                 " has a negative duration of ", duration, " ns"));
        }
      }
      total_duration += duration;
      total_delay += delay;
      bytes = std::max({bytes, send.endpoint.bytes, recv.endpoint.bytes});
      src_cores.insert(send.endpoint.src_core ? static_cast<uint32_t>(*send.endpoint.src_core) : send.core_id);
      dst_cores.insert(recv.endpoint.dst_core ? static_cast<uint32_t>(*recv.endpoint.dst_core) : recv.core_id);
      names.insert(send.endpoint.name);
      names.insert(recv.endpoint.name);
    }
    const double mean_duration_us = static_cast<double>(total_duration) / pairs / 1e3;
    info.set_duration_us(mean_duration_us);
    info.set_send_delay_us(static_cast<double>(total_delay) / pairs / 1e3);
    info.set_occurrences(static_cast<uint32_t>(pairs));
    info.set_data_size(bytes);
    if (mean_duration_us > 0 && peak_link_bandwidth_bytes_per_s > 0) {
      info.set_utilization(static_cast<double>(bytes) / (mean_duration_us * 1e-6) / peak_link_bandwidth_bytes_per_s);
    }
    for (uint32_t c : src_cores) info.add_src_core_ids(c);
    for (uint32_t c : dst_cores) info.add_dst_core_ids(c);
    for (const auto& n : names) info.add_hlo_names(n);
    result.channels_by_step[key.first].push_back(std::move(info));
  }
  return result;
}

}  // namespace podscope::analysis
