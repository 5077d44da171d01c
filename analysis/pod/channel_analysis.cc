#include "analysis/pod/channel_analysis.h"

#include <algorithm>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"

namespace podscope::analysis {
namespace {

constexpr size_t kMaxWarningLines = 10;

template <typename T>
void sort_unique(std::vector<T>& values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
}

}  // namespace

podscope::v1::ChannelInfo channel_info(const ChannelSummary& summary) {
  podscope::v1::ChannelInfo info;
  info.set_channel_id(summary.channel_id);
  info.set_duration_us(summary.duration_us);
  info.set_send_delay_us(summary.send_delay_us);
  info.set_occurrences(summary.occurrences);
  info.set_data_size(summary.data_size);
  info.set_utilization(summary.utilization);
  for (uint32_t c : summary.src_cores) info.add_src_core_ids(c);
  for (uint32_t c : summary.dst_cores) info.add_dst_core_ids(c);
  for (std::string_view n : summary.names) info.add_hlo_names(std::string(n));
  return info;
}

ChannelResult analyze_channels(std::vector<MergedEndpoint> endpoints, double peak_link_bandwidth_bytes_per_s) {
  ChannelResult result;
  // By (step, channel), then sends before recv-dones, each side in start order: one sort, then one walk over the
  // groups (no container per channel).
  auto key_of = [](const MergedEndpoint& e) {
    return std::make_tuple(e.step_num, e.channel_id, !e.is_send, e.start_ns);
  };
  std::stable_sort(endpoints.begin(), endpoints.end(),
                   [&](const MergedEndpoint& a, const MergedEndpoint& b) { return key_of(a) < key_of(b); });
  for (size_t begin = 0; begin < endpoints.size();) {
    const int64_t step = endpoints[begin].step_num;
    const int64_t channel = endpoints[begin].channel_id;
    size_t end = begin;
    while (end < endpoints.size() && endpoints[end].step_num == step && endpoints[end].channel_id == channel) {
      ++end;
    }
    size_t recv_begin = begin;
    while (recv_begin < end && endpoints[recv_begin].is_send) ++recv_begin;
    const std::pair<int64_t, int64_t> key{step, channel};
    const auto* sends = endpoints.data() + begin;
    const auto* recvs = endpoints.data() + recv_begin;
    const size_t send_count = recv_begin - begin, recv_count = end - recv_begin;
    begin = end;
    const size_t pairs = std::min(send_count, recv_count);
    result.unpaired_sends += static_cast<uint32_t>(send_count - pairs);
    result.unpaired_recv_dones += static_cast<uint32_t>(recv_count - pairs);
    if (pairs == 0) continue;

    ChannelSummary summary;
    summary.step_num = key.first;
    summary.channel_id = key.second;
    int64_t total_duration = 0, total_delay = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < pairs; ++i) {
      const MergedEndpoint& send = sends[i];
      const MergedEndpoint& recv = recvs[i];
      const int64_t duration = recv.end_ns - send.start_ns;
      const int64_t delay = std::max<int64_t>(0, send.start_ns - recv.start_ns);
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
      bytes = std::max({bytes, send.endpoint->bytes(), recv.endpoint->bytes()});
      summary.src_cores.push_back(send.endpoint->has_src_core() ? static_cast<uint32_t>(send.endpoint->src_core())
                                                                : send.core_id);
      summary.dst_cores.push_back(recv.endpoint->has_dst_core() ? static_cast<uint32_t>(recv.endpoint->dst_core())
                                                                : recv.core_id);
      summary.names.push_back(send.endpoint->name());
      summary.names.push_back(recv.endpoint->name());
    }
    sort_unique(summary.src_cores), sort_unique(summary.dst_cores), sort_unique(summary.names);
    const double mean_duration_us = static_cast<double>(total_duration) / pairs / 1e3;
    summary.duration_us = mean_duration_us;
    summary.send_delay_us = static_cast<double>(total_delay) / pairs / 1e3;
    summary.occurrences = static_cast<uint32_t>(pairs);
    summary.data_size = bytes;
    if (mean_duration_us > 0 && peak_link_bandwidth_bytes_per_s > 0) {
      summary.utilization = static_cast<double>(bytes) / (mean_duration_us * 1e-6) / peak_link_bandwidth_bytes_per_s;
    }
    result.channels.push_back(std::move(summary));
  }
  return result;
}

}  // namespace podscope::analysis
