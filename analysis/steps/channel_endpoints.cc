#include "analysis/steps/channel_endpoints.h"

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::analysis {
using xspace::XEventView;
using xspace::XPlaneReader;

ChannelStatIds::ChannelStatIds(const XPlaneReader& plane)
    : channel_id(plane.stat_id(xspace::kChannelIdStat)),
      bytes(plane.stat_id(xspace::kBytesStat)),
      src_core(plane.stat_id(xspace::kSrcCoreStat)),
      dst_core(plane.stat_id(xspace::kDstCoreStat)) {}

std::optional<ChannelEndpoint> channel_endpoint(const XEventView& e, OpKind kind, int64_t step_num,
                                                const ChannelStatIds& stats) {
  // Sends and recv-dones that carry a channel id (async "recv" / "send-done" halves are not endpoints).
  if (kind != OpKind::kSend && kind != OpKind::kRecvDone) return std::nullopt;
  const std::string_view base_name = strip_instance_suffix(e.name());
  const bool endpoint = base_name == xspace::kSendEventName || base_name == xspace::kRecvDoneEventName;
  const auto channel = e.int_stat(stats.channel_id);
  if (!endpoint || !channel) return std::nullopt;
  ChannelEndpoint ep;
  ep.is_send = kind == OpKind::kSend;
  ep.step_num = step_num;
  ep.channel_id = *channel;
  ep.start_ns = e.start_ns();
  ep.end_ns = e.end_ns();
  ep.bytes = static_cast<uint64_t>(e.int_stat(stats.bytes).value_or(0));
  ep.name = std::string(e.name());
  ep.src_core = e.int_stat(stats.src_core);
  ep.dst_core = e.int_stat(stats.dst_core);
  return ep;
}

ChannelEndpointFinder::ChannelEndpointFinder(const tensorflow::profiler::XPlane& plane, PlaneKind kind)
    : reader_(plane),
      kind_(kind),
      steps_(reader_),
      stats_(reader_),
      step_num_stat_(reader_.stat_id(xspace::kStepNumStat)),
      group_id_stat_(reader_.stat_id(xspace::kGroupIdStat)) {}

std::optional<ChannelEndpoint> ChannelEndpointFinder::find(const XEventView& e) const {
  const std::string_view line_name = e.line().name();
  if (!is_op_line(kind_, line_name)) return std::nullopt;
  const OpKind kind = classify_op(e.name(), line_name, false);
  if (kind != OpKind::kSend && kind != OpKind::kRecvDone) return std::nullopt;
  auto step = e.int_stat(step_num_stat_);
  if (!step) step = steps_.step_of(e.start_ns(), steps_.group_id_stat() ? e.int_stat(group_id_stat_) : std::nullopt);
  if (!step) return std::nullopt;
  return channel_endpoint(e, kind, *step, stats_);
}

}  // namespace podscope::analysis
