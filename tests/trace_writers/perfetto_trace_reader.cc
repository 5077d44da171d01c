#include "tests/trace_writers/perfetto_trace_reader.h"

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

namespace podscope::trace_writers::testing {
namespace {

// One field of a message.
struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t varint = 0;     // varint and fixed64 values
  std::string_view bytes;  // length-delimited
};

class MessageReader {
 public:
  explicit MessageReader(std::string_view data) : data_(data) {}

  // False at the end; sets `failed` on malformed input.
  bool next(Field& field) {
    if (pos_ >= data_.size() || failed) return false;
    uint64_t key = 0;
    if (!varint(key)) return fail();
    field.number = static_cast<uint32_t>(key >> 3);
    field.wire_type = static_cast<uint32_t>(key & 7);
    switch (field.wire_type) {
      case 0: return varint(field.varint) || fail();
      case 1:
        if (pos_ + 8 > data_.size()) return fail();
        field.varint = 0;
        for (int i = 0; i < 8; ++i) {
          field.varint |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
        }
        pos_ += 8;
        return true;
      case 2: {
        uint64_t size = 0;
        if (!varint(size) || pos_ + size > data_.size()) return fail();
        field.bytes = data_.substr(pos_, size);
        pos_ += size;
        return true;
      }
      case 5:
        if (pos_ + 4 > data_.size()) return fail();
        pos_ += 4;
        return true;
      default: return fail();
    }
  }

  bool failed = false;

 private:
  bool varint(uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64 && pos_ < data_.size(); shift += 7) {
      const auto byte = static_cast<uint8_t>(data_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }
  bool fail() {
    failed = true;
    return false;
  }

  std::string_view data_;
  size_t pos_ = 0;
};

// Interned tables of one sequence: kind (1 categories, 2 names, 3 annotation names) -> iid -> name.
using Interned = std::map<uint32_t, std::map<uint64_t, std::string>>;

void read_interned(std::string_view data, Interned& interned) {
  MessageReader reader(data);
  Field f;
  while (reader.next(f)) {
    if (f.wire_type != 2 || f.number < 1 || f.number > 3) continue;
    MessageReader entry(f.bytes);
    Field e;
    uint64_t iid = 0;
    std::string name;
    while (entry.next(e)) {
      if (e.number == 1) iid = e.varint;
      if (e.number == 2) name = std::string(e.bytes);
    }
    interned[f.number][iid] = name;
  }
}

std::string lookup(Interned& interned, uint32_t kind, uint64_t iid, bool& resolved) {
  auto& table = interned[kind];
  auto it = table.find(iid);
  if (it == table.end()) {
    resolved = false;
    return {};
  }
  return it->second;
}

DecodedTrack read_track(std::string_view data) {
  DecodedTrack track;
  MessageReader reader(data);
  Field f;
  while (reader.next(f)) {
    switch (f.number) {
      case 1: track.uuid = f.varint; break;
      case 2: track.name = std::string(f.bytes); break;
      case 5: track.parent_uuid = f.varint; break;
      case 8: track.is_counter = true; break;
      case 3:
      case 4: {
        (f.number == 3 ? track.is_process : track.is_thread) = true;
        MessageReader inner(f.bytes);
        Field g;
        while (inner.next(g)) {
          if (g.number == 1) track.pid = static_cast<int64_t>(g.varint);
          if ((f.number == 3 && g.number == 6) || (f.number == 4 && g.number == 5)) track.name = std::string(g.bytes);
        }
        break;
      }
    }
  }
  return track;
}

DecodedEvent read_event(std::string_view data, Interned& interned) {
  DecodedEvent event;
  MessageReader reader(data);
  Field f;
  while (reader.next(f)) {
    switch (f.number) {
      case 9: event.type = f.varint; break;
      case 11: event.track_uuid = f.varint; break;
      case 10: event.name = lookup(interned, 2, f.varint, event.interning_resolved); break;
      case 3: event.category = lookup(interned, 1, f.varint, event.interning_resolved); break;
      case 44: {
        double value;
        std::memcpy(&value, &f.varint, sizeof value);
        event.counter_value = value;
        break;
      }
      case 47: event.flow_ids.push_back(f.varint); break;
      case 48: event.terminating_flow_ids.push_back(f.varint); break;
      case 4: {
        MessageReader inner(f.bytes);
        Field g;
        std::string name, value;
        while (inner.next(g)) {
          if (g.number == 1) name = lookup(interned, 3, g.varint, event.interning_resolved);
          if (g.number == 3) value = std::to_string(g.varint);
          if (g.number == 4) value = std::to_string(static_cast<int64_t>(g.varint));
          if (g.number == 5) {
            double d;
            std::memcpy(&d, &g.varint, sizeof d);
            std::ostringstream text;
            text << d;
            value = text.str();
          }
          if (g.number == 6) value = std::string(g.bytes);
        }
        event.annotations[name] = value;
        break;
      }
    }
  }
  return event;
}

}  // namespace

DecodedTrace read_perfetto_trace(const std::filesystem::path& path) {
  DecodedTrace trace;
  std::ifstream in(path, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<uint32_t, Interned> interned_by_sequence;
  std::set<uint32_t> seen_sequences;
  MessageReader packets(data);
  Field p;
  while (packets.next(p)) {
    if (p.number != 1 || p.wire_type != 2) {
      trace.error = "a top-level field other than packet: " + std::to_string(p.number);
      return trace;
    }
    MessageReader packet(p.bytes);
    Field f;
    uint64_t timestamp = 0, flags = 0;
    uint32_t sequence = 0;
    std::string_view track_event, track_descriptor, interned;
    while (packet.next(f)) {
      switch (f.number) {
        case 8: timestamp = f.varint; break;
        case 10: sequence = static_cast<uint32_t>(f.varint); break;
        case 13: flags = f.varint; break;
        case 11: track_event = f.bytes; break;
        case 12: interned = f.bytes; break;
        case 60: track_descriptor = f.bytes; break;
      }
    }
    if (packet.failed) {
      trace.error = "a malformed packet";
      return trace;
    }
    if (seen_sequences.insert(sequence).second && (flags & 1) == 0) {
      trace.sequences_without_cleared_state.push_back(sequence);
    }
    Interned& state = interned_by_sequence[sequence];
    if (!interned.empty()) read_interned(interned, state);
    if (!track_descriptor.empty()) {
      DecodedTrack track = read_track(track_descriptor);
      trace.tracks[track.uuid] = track;
    }
    if (!track_event.empty()) {
      DecodedEvent event = read_event(track_event, state);
      event.timestamp = timestamp;
      event.sequence_id = sequence;
      trace.events.push_back(std::move(event));
    }
  }
  if (packets.failed) trace.error = "a malformed top-level field";
  return trace;
}

}  // namespace podscope::trace_writers::testing
