#include "trace_writers/perfetto_trace.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "analysis/steps/channel_endpoints.h"
#include "analysis/steps/op_classifier.h"
#include "trace_writers/perfetto_fields.h"
#include "trace_writers/proto_wire.h"
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
  uint64_t category_iid = 0;
  enum FlowRole : uint8_t { kNoFlow, kFlowStart, kFlowEnd } flow_role = kNoFlow;
  uint64_t flow_id = 0;
};

// A track of a line: the line's own, or an overflow track for events that overlap without nesting.
struct Lane {
  uint64_t uuid = 0;
  std::vector<int64_t> open_ends;  // ends of the open slices, innermost last
  // Encoded once per lane: a slice end on it, and the start of a slice begin on it.
  wire::Buffer end_event;
  wire::Buffer begin_prefix;
};

// What a line's events of one metadata id share.
struct LineEventInfo {
  uint64_t category_iid = 0;
  bool maybe_endpoint = false;  // a send or recv-done: asks the endpoint finder
};

// What all events of one metadata id share: the interned name and the metadata's own stats, encoded.
struct EventInfo {
  uint64_t name_iid = 0;
  wire::Buffer annotations;
};

// Entries by id (event or stat metadata): a plain vector for the small ids every writer we know uses, a
// hash map beyond; looked up once or twice per event.
template <typename T>
class IdTable {
 public:
  // The entry for `id` and whether it was just created.
  std::pair<T*, bool> get(int64_t id) {
    if (id >= 0 && id < kMaxDenseId) {
      const auto index = static_cast<size_t>(id);
      if (index >= dense_.size()) {
        dense_.resize(index + 1);
        present_.resize(index + 1, false);
      }
      const bool created = !present_[index];
      present_[index] = true;
      return {&dense_[index], created};
    }
    auto [it, created] = sparse_.try_emplace(id);
    return {&it->second, created};
  }

  void clear() {
    dense_.clear();
    present_.clear();
    sparse_.clear();
  }

 private:
  static constexpr int64_t kMaxDenseId = 1 << 20;
  std::vector<T> dense_;
  std::vector<bool> present_;
  absl::flat_hash_map<int64_t, T> sparse_;
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
      : owner_(owner),
        origin_(origin),
        plane_(plane),
        reader_(plane),
        sequence_id_(owner.next_sequence_id_++),
        pid_(owner.next_pid_++),
        device_kind_(analysis::device_plane_kind(plane.name())) {
    if (device_kind_) endpoints_.emplace(plane, *device_kind_);
    event_packet_fields_.varint_field(pf::kPacketTrustedSequenceId, sequence_id_);
    event_packet_fields_.varint_field(pf::kPacketSequenceFlags, pf::kSeqNeedsIncrementalState);
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

  void flush_if_large() {
    if (owner_.buffer_.size() < kFlushBytes) return;
    owner_.out_.write(owner_.buffer_.view());
    owner_.buffer_.clear();
  }

  void write_track_descriptor(const wire::Buffer& descriptor, uint64_t flags) {
    packet_.clear();
    packet_.varint_field(pf::kPacketTrustedSequenceId, sequence_id_);
    if (flags != 0) packet_.varint_field(pf::kPacketSequenceFlags, flags);
    packet_.bytes_field(pf::kPacketTrackDescriptor, descriptor.view());
    owner_.buffer_.bytes_field(pf::kTracePacket, packet_.view());
    flush_if_large();
  }

  // Written straight into the output: the packet's size is known from its parts.
  void write_event_packet(int64_t time_ns, std::string_view event) {
    const auto timestamp = static_cast<uint64_t>(time_ns);
    size_t size = wire::varint_size(wire::tag(pf::kPacketTimestamp, wire::kVarint)) + wire::varint_size(timestamp) +
                  event_packet_fields_.size() + wire::bytes_field_size(pf::kPacketTrackEvent, event.size());
    if (!interned_.empty()) size += wire::bytes_field_size(pf::kPacketInternedData, interned_.size());
    wire::Buffer& out = owner_.buffer_;
    out.bytes_field_header(pf::kTracePacket, size);
    out.varint_field(pf::kPacketTimestamp, timestamp);
    out.append(event_packet_fields_.view());
    if (!interned_.empty()) {
      out.bytes_field(pf::kPacketInternedData, interned_.view());
      interned_.clear();
    }
    out.bytes_field(pf::kPacketTrackEvent, event);
    flush_if_large();
  }

  // --- tracks

  void write_process_track() {
    process_uuid_ = owner_.next_track_uuid_++;
    wire::Buffer process;
    process.varint_field(pf::kProcessPid, static_cast<uint64_t>(pid_));
    process.bytes_field(pf::kProcessName, std::string(origin_.host_name) + " " + plane_.name());
    wire::Buffer descriptor;
    descriptor.varint_field(pf::kTrackUuid, process_uuid_);
    descriptor.bytes_field(pf::kTrackProcess, process.view());
    // The sequence's first packet: its interned state starts empty here.
    write_track_descriptor(descriptor, pf::kSeqIncrementalStateCleared);
  }

  uint64_t new_thread_track(std::string_view name) {
    const uint64_t uuid = owner_.next_track_uuid_++;
    wire::Buffer thread;
    thread.varint_field(pf::kThreadPid, static_cast<uint64_t>(pid_));
    thread.varint_field(pf::kThreadTid, static_cast<uint64_t>(++last_tid_));
    thread.bytes_field(pf::kThreadName, name);
    wire::Buffer descriptor;
    descriptor.varint_field(pf::kTrackUuid, uuid);
    descriptor.varint_field(pf::kTrackParentUuid, process_uuid_);
    descriptor.bytes_field(pf::kTrackThread, thread.view());
    write_track_descriptor(descriptor, 0);
    return uuid;
  }

  uint64_t counter_track(std::string_view series) {
    auto [it, created] = counter_tracks_.try_emplace(std::string(series), 0);
    if (!created) return it->second;
    it->second = owner_.next_track_uuid_++;
    wire::Buffer descriptor;
    descriptor.varint_field(pf::kTrackUuid, it->second);
    descriptor.bytes_field(pf::kTrackName, series);
    descriptor.varint_field(pf::kTrackParentUuid, process_uuid_);
    descriptor.bytes_field(pf::kTrackCounter, "");
    write_track_descriptor(descriptor, 0);
    return it->second;
  }

  // --- interning (per sequence; new entries ride on the next event packet)

  uint64_t intern(absl::flat_hash_map<std::string, uint64_t>& table, uint32_t field, std::string_view name) {
    auto [it, created] = table.try_emplace(std::string(name), table.size() + 1);
    if (created) {
      wire::Buffer entry;
      entry.varint_field(pf::kInternedIid, it->second);
      entry.bytes_field(pf::kInternedName, name);
      interned_.bytes_field(field, entry.view());
    }
    return it->second;
  }

  // 0 when the stat has no metadata (such stats are left out, as in the JSON trace).
  uint64_t annotation_name_iid(int64_t stat_metadata_id) {
    auto [iid, created] = annotation_name_iids_.get(stat_metadata_id);
    if (created) {
      auto md = plane_.stat_metadata().find(stat_metadata_id);
      *iid = md == plane_.stat_metadata().end()
                 ? 0
                 : intern(annotation_names_, pf::kInternedDebugAnnotationNames, md->second.name());
    }
    return *iid;
  }

  void append_annotation(wire::Buffer& event, const XStat& stat) {
    const uint64_t name_iid = annotation_name_iid(stat.metadata_id());
    if (name_iid == 0) return;
    annotation_.clear();
    annotation_.varint_field(pf::kAnnotationNameIid, name_iid);
    switch (stat.value_case()) {
      case XStat::kDoubleValue: annotation_.double_field(pf::kAnnotationDoubleValue, stat.double_value()); break;
      case XStat::kUint64Value: annotation_.varint_field(pf::kAnnotationUintValue, stat.uint64_value()); break;
      case XStat::kInt64Value:
        annotation_.varint_field(pf::kAnnotationIntValue, static_cast<uint64_t>(stat.int64_value()));
        break;
      case XStat::kStrValue: annotation_.bytes_field(pf::kAnnotationStringValue, stat.str_value()); break;
      case XStat::kCompressedStrValue:
        annotation_.bytes_field(pf::kAnnotationStringValue, reader_.str_of(&stat).value_or(""));
        break;
      case XStat::kBytesValue:
        // Binary payloads are summarized by size; a trace viewer cannot show them anyway.
        annotation_.bytes_field(pf::kAnnotationStringValue, std::to_string(stat.bytes_value().size()) + " bytes");
        break;
      case XStat::kRefValue:
        annotation_.bytes_field(pf::kAnnotationStringValue, reader_.stat_name(static_cast<int64_t>(stat.ref_value())));
        break;
      case XStat::VALUE_NOT_SET: return;
    }
    event.bytes_field(pf::kEventDebugAnnotations, annotation_.view());
  }

  const EventInfo& event_info(int64_t metadata_id) {
    auto [info, created] = event_infos_.get(metadata_id);
    if (created) {
      info->name_iid = intern(event_names_, pf::kInternedEventNames, reader_.event_name(metadata_id));
      if (const auto* md = reader_.event_metadata(metadata_id)) {
        for (const XStat& stat : md->stats()) append_annotation(info->annotations, stat);
      }
    }
    return *info;
  }

  const LineEventInfo& line_event_info(const XLine& line, int64_t metadata_id) {
    auto [info, created] = line_event_infos_.get(metadata_id);
    if (created) {
      std::string_view category = device_kind_ ? "device" : "host";
      if (line.name() == xspace::kStepsLineName) {
        category = "step";
      } else if (device_kind_ && analysis::is_op_line(*device_kind_, line.name())) {
        const analysis::OpKind kind = analysis::classify_op(reader_.event_name(metadata_id), line.name(), false);
        category = analysis::op_kind_name(kind);
        info->maybe_endpoint = kind == analysis::OpKind::kSend || kind == analysis::OpKind::kRecvDone;
      }
      info->category_iid = intern(categories_, pf::kInternedEventCategories, category);
    }
    return *info;
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
      event_.varint_field(pf::kEventType, pf::kTypeCounter);
      event_.varint_field(pf::kEventTrackUuid, counter_track(e.name()));
      event_.double_field(pf::kEventDoubleCounterValue, e.double_stat(xspace::kCounterValueStat).value_or(0.0));
      write_event_packet(time_ns, event_.view());
      ++owner_.counts_.counter_values;
    });
  }

  void write_slices(const XLine& line) {
    line_event_infos_.clear();
    const auto& events = line.events();
    spans_.clear();
    spans_.reserve(static_cast<size_t>(events.size()));
    for (int i = 0; i < events.size(); ++i) {
      const xspace::XEventView e(reader_, line, events[i]);
      const int64_t start = e.start_ns() - origin_.clock_offset_ns;
      const LineEventInfo& info = line_event_info(line, events[i].metadata_id());
      Span span{start, start + e.duration_ns(), i, info.category_iid};
      if (info.maybe_endpoint) {
        if (const auto flow = flow_of(e)) {
          span.flow_id = flow->first;
          span.flow_role = flow->second ? Span::kFlowStart : Span::kFlowEnd;
        }
      }
      if (owner_.window_ && !owner_.window_->overlaps(span.start_ns, span.end_ns)) continue;
      spans_.push_back(span);
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
      write_begin(events[span.index], span, lane);
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
    lane.uuid = new_thread_track(lanes_.size() == 1
                                     ? std::string(line_name)
                                     : std::string(line_name) + " (overlap " + std::to_string(lanes_.size()) + ")");
    lane.end_event.varint_field(pf::kEventType, pf::kTypeSliceEnd);
    lane.end_event.varint_field(pf::kEventTrackUuid, lane.uuid);
    lane.begin_prefix.varint_field(pf::kEventType, pf::kTypeSliceBegin);
    lane.begin_prefix.varint_field(pf::kEventTrackUuid, lane.uuid);
    return lane;
  }

  void close_until(Lane& lane, int64_t time_ns) {
    while (!lane.open_ends.empty() && lane.open_ends.back() <= time_ns) {
      write_event_packet(lane.open_ends.back(), lane.end_event.view());
      lane.open_ends.pop_back();
    }
  }

  void write_begin(const tensorflow::profiler::XEvent& event, const Span& span, const Lane& lane) {
    const EventInfo& info = event_info(event.metadata_id());
    event_.clear();
    event_.append(lane.begin_prefix.view());
    event_.varint_field(pf::kEventNameIid, info.name_iid);
    event_.varint_field(pf::kEventCategoryIids, span.category_iid);
    event_.append(info.annotations.view());
    for (const XStat& stat : event.stats()) append_annotation(event_, stat);
    if (span.flow_role == Span::kFlowStart) {
      event_.fixed64_field(pf::kEventFlowIds, span.flow_id);
      ++owner_.counts_.flow_starts;
    } else if (span.flow_role == Span::kFlowEnd) {
      event_.fixed64_field(pf::kEventTerminatingFlowIds, span.flow_id);
      ++owner_.counts_.flow_ends;
    }
    write_event_packet(span.start_ns, event_.view());
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
  IdTable<uint64_t> annotation_name_iids_;
  IdTable<EventInfo> event_infos_;
  IdTable<LineEventInfo> line_event_infos_;  // of the line being written
  absl::flat_hash_map<std::string, uint64_t> counter_tracks_;
  absl::flat_hash_map<TransferKey, uint32_t> sends_seen_, recv_dones_seen_;

  std::vector<Span> spans_;
  std::vector<Lane> lanes_;
  wire::Buffer interned_;             // InternedData entries not yet written
  wire::Buffer event_packet_fields_;  // sequence id and flags, the same on every event packet
  wire::Buffer packet_, event_, annotation_;
};

PerfettoTraceWriter::PerfettoTraceWriter(run_directory::StreamedFile& out, std::optional<TraceWindow> window)
    : out_(out), window_(window) {}

void PerfettoTraceWriter::add_plane(const PlaneOrigin& origin, const XPlane& plane) {
  PlaneWriter(*this, origin, plane).write();
}

void PerfettoTraceWriter::finish() {
  out_.write(buffer_.view());
  buffer_.clear();
}

}  // namespace podscope::pod_capture
