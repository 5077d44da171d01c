#include "pod_capture/perfetto_trace.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "analysis/core_trace.h"
#include "analysis/op_classifier.h"
#include "pod_capture/perfetto_fields.h"
#include "pod_capture/proto_wire.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::pod_capture {
namespace {

namespace pf = perfetto_fields;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XStat;

constexpr size_t kFlushBytes = 1 << 20;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// An event of a line with its coordinator-clock times, for ordering.
struct Span {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int index = 0;
};

// A track of a line: the line's own, or an overflow track for events that overlap without nesting.
struct Lane {
  uint64_t uuid = 0;
  std::vector<int64_t> open_ends;  // ends of the open slices, innermost last
};

// What a line's events of one metadata id share.
struct LineEventInfo {
  uint64_t category_iid = 0;
  bool maybe_endpoint = false;  // a send or recv-done: asks the endpoint finder
};

// What all events of one metadata id share: the interned name and the metadata's own stats, encoded.
struct EventInfo {
  uint64_t name_iid = 0;
  std::string annotations;
};

using TransferKey = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // step, channel, source, destination

}  // namespace

uint64_t channel_flow_id(int64_t step_num, int64_t channel_id, int64_t src_core, int64_t dst_core,
                         uint32_t occurrence) {
  uint64_t h = splitmix64(static_cast<uint64_t>(step_num));
  for (const uint64_t v : {static_cast<uint64_t>(channel_id), static_cast<uint64_t>(src_core),
                           static_cast<uint64_t>(dst_core), static_cast<uint64_t>(occurrence)}) {
    h = splitmix64(h ^ v);
  }
  return h == 0 ? 1 : h;
}

// Writes one plane as one packet sequence.
class PerfettoTraceWriter::PlaneWriter {
 public:
  PlaneWriter(PerfettoTraceWriter& owner, const PlaneOrigin& origin, const XPlane& plane)
      : owner_(owner), origin_(origin), plane_(plane), reader_(plane),
        sequence_id_(owner.next_sequence_id_++), pid_(owner.next_pid_++),
        device_kind_(analysis::device_plane_kind(plane.name())) {
    if (device_kind_) endpoints_.emplace(plane, *device_kind_);
  }

  void write() {
    write_process_track();
    for (const XLine& line : plane_.lines()) {
      if (line.name() == xspace::kCountersLineName) {
        write_counters(line);
      } else {
        write_slices(line);
      }
    }
  }

 private:
  // --- packets

  void append_packet(const std::string& packet) {
    wire::append_bytes_field(owner_.buffer_, pf::kTracePacket, packet);
    if (owner_.buffer_.size() >= kFlushBytes) {
      owner_.out_.write(owner_.buffer_);
      owner_.buffer_.clear();
    }
  }

  void write_track_descriptor(const std::string& descriptor, uint64_t flags) {
    packet_.clear();
    wire::append_varint_field(packet_, pf::kPacketTrustedSequenceId, sequence_id_);
    if (flags != 0) wire::append_varint_field(packet_, pf::kPacketSequenceFlags, flags);
    wire::append_bytes_field(packet_, pf::kPacketTrackDescriptor, descriptor);
    append_packet(packet_);
  }

  void write_event_packet(int64_t time_ns, const std::string& event) {
    packet_.clear();
    wire::append_varint_field(packet_, pf::kPacketTimestamp, static_cast<uint64_t>(time_ns));
    wire::append_varint_field(packet_, pf::kPacketTrustedSequenceId, sequence_id_);
    wire::append_varint_field(packet_, pf::kPacketSequenceFlags, pf::kSeqNeedsIncrementalState);
    if (!interned_.empty()) {
      wire::append_bytes_field(packet_, pf::kPacketInternedData, interned_);
      interned_.clear();
    }
    wire::append_bytes_field(packet_, pf::kPacketTrackEvent, event);
    append_packet(packet_);
  }

  // --- tracks

  void write_process_track() {
    process_uuid_ = owner_.next_track_uuid_++;
    std::string process;
    wire::append_varint_field(process, pf::kProcessPid, static_cast<uint64_t>(pid_));
    wire::append_bytes_field(process, pf::kProcessName, std::string(origin_.host_name) + " " + plane_.name());
    std::string descriptor;
    wire::append_varint_field(descriptor, pf::kTrackUuid, process_uuid_);
    wire::append_bytes_field(descriptor, pf::kTrackProcess, process);
    // The sequence's first packet: its interned state starts empty here.
    write_track_descriptor(descriptor, pf::kSeqIncrementalStateCleared);
  }

  uint64_t new_thread_track(std::string_view name) {
    const uint64_t uuid = owner_.next_track_uuid_++;
    std::string thread;
    wire::append_varint_field(thread, pf::kThreadPid, static_cast<uint64_t>(pid_));
    wire::append_varint_field(thread, pf::kThreadTid, static_cast<uint64_t>(++last_tid_));
    wire::append_bytes_field(thread, pf::kThreadName, name);
    std::string descriptor;
    wire::append_varint_field(descriptor, pf::kTrackUuid, uuid);
    wire::append_varint_field(descriptor, pf::kTrackParentUuid, process_uuid_);
    wire::append_bytes_field(descriptor, pf::kTrackThread, thread);
    write_track_descriptor(descriptor, 0);
    return uuid;
  }

  uint64_t counter_track(std::string_view series) {
    auto [it, created] = counter_tracks_.try_emplace(std::string(series), 0);
    if (!created) return it->second;
    it->second = owner_.next_track_uuid_++;
    std::string descriptor;
    wire::append_varint_field(descriptor, pf::kTrackUuid, it->second);
    wire::append_bytes_field(descriptor, pf::kTrackName, series);
    wire::append_varint_field(descriptor, pf::kTrackParentUuid, process_uuid_);
    wire::append_bytes_field(descriptor, pf::kTrackCounter, "");
    write_track_descriptor(descriptor, 0);
    return it->second;
  }

  // --- interning (per sequence; new entries ride on the next event packet)

  uint64_t intern(absl::flat_hash_map<std::string, uint64_t>& table, uint32_t field, std::string_view name) {
    auto [it, created] = table.try_emplace(std::string(name), table.size() + 1);
    if (created) {
      std::string entry;
      wire::append_varint_field(entry, pf::kInternedIid, it->second);
      wire::append_bytes_field(entry, pf::kInternedName, name);
      wire::append_bytes_field(interned_, field, entry);
    }
    return it->second;
  }

  // 0 when the stat has no metadata (such stats are left out, as in the JSON trace).
  uint64_t annotation_name_iid(int64_t stat_metadata_id) {
    auto [it, created] = annotation_name_iids_.try_emplace(stat_metadata_id, 0);
    if (created) {
      auto md = plane_.stat_metadata().find(stat_metadata_id);
      if (md != plane_.stat_metadata().end()) {
        it->second = intern(annotation_names_, pf::kInternedDebugAnnotationNames, md->second.name());
      }
    }
    return it->second;
  }

  void append_annotation(std::string& event, const XStat& stat) {
    const uint64_t name_iid = annotation_name_iid(stat.metadata_id());
    if (name_iid == 0) return;
    annotation_.clear();
    wire::append_varint_field(annotation_, pf::kAnnotationNameIid, name_iid);
    switch (stat.value_case()) {
      case XStat::kDoubleValue: wire::append_double_field(annotation_, pf::kAnnotationDoubleValue, stat.double_value()); break;
      case XStat::kUint64Value: wire::append_varint_field(annotation_, pf::kAnnotationUintValue, stat.uint64_value()); break;
      case XStat::kInt64Value:
        wire::append_varint_field(annotation_, pf::kAnnotationIntValue, static_cast<uint64_t>(stat.int64_value()));
        break;
      case XStat::kStrValue: wire::append_bytes_field(annotation_, pf::kAnnotationStringValue, stat.str_value()); break;
      case XStat::kBytesValue:
        // Binary payloads are summarized by size; a trace viewer cannot show them anyway.
        wire::append_bytes_field(annotation_, pf::kAnnotationStringValue,
                                 std::to_string(stat.bytes_value().size()) + " bytes");
        break;
      case XStat::kRefValue:
        wire::append_bytes_field(annotation_, pf::kAnnotationStringValue,
                                 reader_.stat_name(static_cast<int64_t>(stat.ref_value())));
        break;
      case XStat::VALUE_NOT_SET: return;
    }
    wire::append_bytes_field(event, pf::kEventDebugAnnotations, annotation_);
  }

  const EventInfo& event_info(int64_t metadata_id) {
    auto [it, created] = event_infos_.try_emplace(metadata_id);
    if (created) {
      it->second.name_iid = intern(event_names_, pf::kInternedEventNames, reader_.event_name(metadata_id));
      if (const auto* md = reader_.event_metadata(metadata_id)) {
        for (const XStat& stat : md->stats()) append_annotation(it->second.annotations, stat);
      }
    }
    return it->second;
  }

  const LineEventInfo& line_event_info(const XLine& line, int64_t metadata_id) {
    auto [it, created] = line_event_infos_.try_emplace(metadata_id);
    if (created) {
      std::string_view category = device_kind_ ? "device" : "host";
      if (line.name() == xspace::kStepsLineName) {
        category = "step";
      } else if (device_kind_ && analysis::is_op_line(*device_kind_, line.name())) {
        const analysis::OpKind kind = analysis::classify_op(reader_.event_name(metadata_id), line.name(), false);
        category = analysis::op_kind_name(kind);
        it->second.maybe_endpoint = kind == analysis::OpKind::kSend || kind == analysis::OpKind::kRecvDone;
      }
      it->second.category_iid = intern(categories_, pf::kInternedEventCategories, category);
    }
    return it->second;
  }

  // --- flows

  // The flow this event starts (send) or ends (recv-done), as {id, is_start}; counted whether or not the
  // event is inside the window, so that a window's ids are the full trace's.
  std::optional<std::pair<uint64_t, bool>> flow_of(const xspace::XEventView& event) {
    const auto endpoint = endpoints_->find(event);
    if (!endpoint) return std::nullopt;
    const int64_t own_core = plane_.id();
    const auto src = endpoint->is_send ? endpoint->src_core.value_or(own_core) : endpoint->src_core;
    const auto dst = endpoint->is_send ? endpoint->dst_core : endpoint->dst_core.value_or(own_core);
    if (!src || !dst) return std::nullopt;
    const TransferKey key{endpoint->step_num, endpoint->channel_id, *src, *dst};
    uint32_t& seen = (endpoint->is_send ? sends_seen_ : recv_dones_seen_)[key];
    return std::pair{channel_flow_id(endpoint->step_num, endpoint->channel_id, *src, *dst, seen++), endpoint->is_send};
  }

  // --- lines

  void write_counters(const XLine& line) {
    reader_.for_each_event(line, [&](const xspace::XEventView& e) {
      const int64_t time_ns = e.start_ns() - origin_.clock_offset_ns;
      if (owner_.window_ && !owner_.window_->overlaps(time_ns, time_ns)) return;
      event_.clear();
      wire::append_varint_field(event_, pf::kEventType, pf::kTypeCounter);
      wire::append_varint_field(event_, pf::kEventTrackUuid, counter_track(e.name()));
      wire::append_double_field(event_, pf::kEventDoubleCounterValue,
                                e.double_stat(xspace::kCounterValueStat).value_or(0.0));
      write_event_packet(time_ns, event_);
      ++owner_.counts_.counter_values;
    });
  }

  void write_slices(const XLine& line) {
    line_event_infos_.clear();
    const auto& events = line.events();
    spans_.clear();
    spans_.reserve(static_cast<size_t>(events.size()));
    flows_.assign(static_cast<size_t>(events.size()), {0, 0});
    for (int i = 0; i < events.size(); ++i) {
      const xspace::XEventView e(reader_, line, events[i]);
      if (device_kind_ && line_event_info(line, events[i].metadata_id()).maybe_endpoint) {
        if (const auto flow = flow_of(e)) flows_[static_cast<size_t>(i)] = {flow->first, flow->second ? 1 : 2};
      }
      const int64_t start = e.start_ns() - origin_.clock_offset_ns;
      const int64_t end = start + e.duration_ns();
      if (owner_.window_ && !owner_.window_->overlaps(start, end)) continue;
      spans_.push_back({start, end, i});
    }
    // Slices nest only in start order with the longer first (an event and one that starts with it and
    // ends inside it); lines are usually written in start order already.
    auto before = [](const Span& a, const Span& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
    };
    if (!std::is_sorted(spans_.begin(), spans_.end(), before)) std::stable_sort(spans_.begin(), spans_.end(), before);

    const std::string_view name = line.display_name().empty() ? line.name() : line.display_name();
    lanes_.clear();
    for (const Span& span : spans_) {
      Lane& lane = lane_for(span, name);
      lane.open_ends.push_back(span.end_ns);
      write_begin(line, events[span.index], span, lane.uuid);
    }
    for (Lane& lane : lanes_) close_until(lane, INT64_MAX);
  }

  // The lane whose open slice holds `span` (after closing, in every lane, the slices that ended by its
  // start), else the first idle lane, else a new one.
  Lane& lane_for(const Span& span, std::string_view line_name) {
    Lane* idle = nullptr;
    for (Lane& lane : lanes_) {
      close_until(lane, span.start_ns);
      if (!lane.open_ends.empty() && lane.open_ends.back() >= span.end_ns) return lane;
      if (lane.open_ends.empty() && idle == nullptr) idle = &lane;
    }
    if (idle != nullptr) return *idle;
    Lane& lane = lanes_.emplace_back();
    lane.uuid = new_thread_track(lanes_.size() == 1 ? std::string(line_name)
                                                    : std::string(line_name) + " (overlap " +
                                                          std::to_string(lanes_.size()) + ")");
    return lane;
  }

  void close_until(Lane& lane, int64_t time_ns) {
    while (!lane.open_ends.empty() && lane.open_ends.back() <= time_ns) {
      event_.clear();
      wire::append_varint_field(event_, pf::kEventType, pf::kTypeSliceEnd);
      wire::append_varint_field(event_, pf::kEventTrackUuid, lane.uuid);
      write_event_packet(lane.open_ends.back(), event_);
      lane.open_ends.pop_back();
    }
  }

  void write_begin(const XLine& line, const tensorflow::profiler::XEvent& event, const Span& span, uint64_t track) {
    const EventInfo& info = event_info(event.metadata_id());
    event_.clear();
    wire::append_varint_field(event_, pf::kEventType, pf::kTypeSliceBegin);
    wire::append_varint_field(event_, pf::kEventTrackUuid, track);
    wire::append_varint_field(event_, pf::kEventNameIid, info.name_iid);
    wire::append_varint_field(event_, pf::kEventCategoryIids, line_event_info(line, event.metadata_id()).category_iid);
    event_ += info.annotations;
    for (const XStat& stat : event.stats()) append_annotation(event_, stat);
    const auto [flow_id, flow_kind] = flows_[static_cast<size_t>(span.index)];
    if (flow_kind == 1) {
      wire::append_fixed64_field(event_, pf::kEventFlowIds, flow_id);
      ++owner_.counts_.flow_starts;
    } else if (flow_kind == 2) {
      wire::append_fixed64_field(event_, pf::kEventTerminatingFlowIds, flow_id);
      ++owner_.counts_.flow_ends;
    }
    write_event_packet(span.start_ns, event_);
    ++owner_.counts_.slices;
  }

  PerfettoTraceWriter& owner_;
  const PlaneOrigin& origin_;
  const XPlane& plane_;
  const xspace::XPlaneReader reader_;
  const uint32_t sequence_id_;
  const int32_t pid_;
  const std::optional<analysis::PlaneKind> device_kind_;
  std::optional<analysis::ChannelEndpointFinder> endpoints_;
  uint64_t process_uuid_ = 0;
  int last_tid_ = 0;

  absl::flat_hash_map<std::string, uint64_t> event_names_, categories_, annotation_names_;
  absl::flat_hash_map<int64_t, uint64_t> annotation_name_iids_;
  absl::flat_hash_map<int64_t, EventInfo> event_infos_;
  absl::flat_hash_map<int64_t, LineEventInfo> line_event_infos_;  // of the line being written
  absl::flat_hash_map<std::string, uint64_t> counter_tracks_;
  absl::flat_hash_map<TransferKey, uint32_t> sends_seen_, recv_dones_seen_;

  std::vector<Span> spans_;
  std::vector<std::pair<uint64_t, int>> flows_;  // per event of the line: {flow id, 0 none / 1 start / 2 end}
  std::vector<Lane> lanes_;
  std::string interned_;  // InternedData entries not yet written
  std::string packet_, event_, annotation_;
};

PerfettoTraceWriter::PerfettoTraceWriter(StreamedFile& out, std::optional<TraceWindow> window)
    : out_(out), window_(window) {}

void PerfettoTraceWriter::add_plane(const PlaneOrigin& origin, const XPlane& plane) {
  PlaneWriter(*this, origin, plane).write();
}

void PerfettoTraceWriter::finish() {
  out_.write(buffer_);
  buffer_.clear();
}

}  // namespace podscope::pod_capture
