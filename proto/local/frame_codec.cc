#include "proto/local/frame_codec.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <type_traits>

namespace podscope::local {
namespace {

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  template <typename T>
  void put(T v) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    U u = static_cast<U>(v);
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  void put_string(std::string_view s) {
    put(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }

 private:
  std::string& out_;
};

class Reader {
 public:
  Reader(std::string_view in, std::string& error) : in_(in), error_(error) {}
  template <typename T>
  bool get(T& v, const char* field) {
    if (in_.size() < sizeof(T)) return fail(field);
    std::make_unsigned_t<T> u = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      u |= static_cast<std::make_unsigned_t<T>>(static_cast<unsigned char>(in_[i])) << (8 * i);
    v = static_cast<T>(u);
    in_.remove_prefix(sizeof(T));
    return true;
  }
  bool get_string(std::string& s, const char* field) {
    uint32_t n = 0;
    if (!get(n, field)) return false;
    if (in_.size() < n) return fail(field);
    s.assign(in_.substr(0, n));
    in_.remove_prefix(n);
    return true;
  }
  // A count of items that each take at least `min_item_bytes`: rejects counts the payload cannot hold,
  // so a hostile count never drives a huge allocation.
  bool get_count(uint32_t& n, size_t min_item_bytes, const char* field) {
    if (!get(n, field)) return false;
    if (static_cast<uint64_t>(n) * min_item_bytes > in_.size()) {
      error_ = std::string(field) + ": count " + std::to_string(n) + " exceeds the " + std::to_string(in_.size()) +
               " bytes left in the frame";
      return false;
    }
    return true;
  }
  bool finish() {
    if (in_.empty()) return true;
    error_ = std::to_string(in_.size()) + " trailing bytes after the message";
    return false;
  }

 private:
  bool fail(const char* field) {
    error_ = std::string("truncated frame: missing ") + field;
    return false;
  }
  std::string_view in_;
  std::string& error_;
};

void encode_payload(const RegisterMsg& m, Writer& w) {
  w.put(m.version);
  w.put(m.pid);
  w.put_string(m.program);
  w.put_string(m.job);
  w.put(static_cast<uint32_t>(m.cores.size()));
  for (int32_t c : m.cores) w.put(c);
}
void encode_payload(const StepsMsg& m, Writer& w) {
  w.put(static_cast<uint32_t>(m.steps.size()));
  for (const StepMsg& s : m.steps) {
    w.put(s.core);
    w.put(s.step_num);
    w.put(s.begin_ns);
    w.put(s.end_ns);
    w.put(s.infeed_ns);
    w.put(s.all_reduce_ns);
  }
}
// Events, InputStages and Allocations batches start alike: session, core, thread id, then the names their
// records use.
template <typename Batch>
void encode_names_header(const Batch& m, Writer& w) {
  w.put(m.session);
  w.put(m.core);
  w.put(m.thread_id);
  w.put(static_cast<uint32_t>(m.names.size()));
  for (const auto& [id, name] : m.names) {
    w.put(id);
    w.put_string(name);
  }
}

void encode_payload(const EventsMsg& m, Writer& w) {
  encode_names_header(m, w);
  w.put(static_cast<uint32_t>(m.events.size()));
  for (const EventMsg& e : m.events) {
    w.put(static_cast<uint8_t>(e.kind));
    w.put(uint8_t{0});
    w.put(uint16_t{0});
    w.put(e.id);
    w.put(e.arg);
    w.put(e.start_ns);
    w.put(e.duration_ns);
    w.put(e.value);
    w.put(e.value2);
  }
}
void encode_payload(const InputStagesMsg& m, Writer& w) {
  encode_names_header(m, w);
  w.put(static_cast<uint32_t>(m.stages.size()));
  for (const InputStageMsg& s : m.stages) {
    w.put(s.name_id);
    w.put(static_cast<uint8_t>(s.category));
    w.put(uint8_t{0});
    w.put(uint16_t{0});
    w.put(s.stage_id);
    w.put(s.parent_id);
    w.put(s.start_ns);
    w.put(s.duration_ns);
  }
}
void encode_payload(const AllocationsMsg& m, Writer& w) {
  encode_names_header(m, w);
  w.put(static_cast<uint32_t>(m.allocations.size()));
  for (const AllocationMsg& a : m.allocations) {
    w.put(static_cast<uint8_t>(a.op));
    w.put(uint8_t{0});
    w.put(uint16_t{0});
    w.put(a.allocator_id);
    w.put(a.op_name_id);
    w.put(a.address);
    w.put(a.bytes);
    w.put(a.time_ns);
  }
}
void encode_payload(const ProfilerServerMsg& m, Writer& w) { w.put(m.port); }
void encode_payload(const CaptureDoneMsg& m, Writer& w) {
  w.put(m.session);
  w.put(m.dropped_events);
}
void encode_payload(const DevicePlanesMsg& m, Writer& w) {
  w.put(m.session);
  w.put(m.total_bytes);
  w.put(m.offset);
  w.put_string(m.chunk);
}
void encode_payload(const HelloMsg& m, Writer& w) {
  w.put(m.max_version);
  w.put(m.min_version);
}
void encode_payload(const WelcomeMsg& m, Writer& w) { w.put(m.version); }
void encode_payload(const RefusedMsg& m, Writer& w) {
  w.put(m.min_version);
  w.put(m.max_version);
  w.put_string(m.reason);
}
void encode_payload(const CaptureOpenMsg& m, Writer& w) {
  w.put(m.session);
  w.put(m.start_ns);
  w.put(m.end_ns);
}
void encode_payload(const CaptureCloseMsg& m, Writer& w) { w.put(m.session); }

bool decode(Reader& r, RegisterMsg& m) {
  uint32_t n = 0;
  if (!r.get(m.version, "register.version") || !r.get(m.pid, "register.pid") ||
      !r.get_string(m.program, "register.program") || !r.get_string(m.job, "register.job") ||
      !r.get_count(n, 4, "register.cores"))
    return false;
  m.cores.resize(n);
  for (int32_t& c : m.cores)
    if (!r.get(c, "register.core")) return false;
  return true;
}
bool decode(Reader& r, StepsMsg& m) {
  uint32_t n = 0;
  if (!r.get_count(n, 44, "steps.count")) return false;
  m.steps.resize(n);
  for (StepMsg& s : m.steps) {
    if (!r.get(s.core, "step.core") || !r.get(s.step_num, "step.step_num") || !r.get(s.begin_ns, "step.begin_ns") ||
        !r.get(s.end_ns, "step.end_ns") || !r.get(s.infeed_ns, "step.infeed_ns") ||
        !r.get(s.all_reduce_ns, "step.all_reduce_ns"))
      return false;
  }
  return true;
}
// What decode_names_header calls the fields of one batch type in its errors.
struct NamesHeaderFields {
  const char* session;
  const char* core;
  const char* thread_id;
  const char* names;
  const char* name_id;
  const char* name;
};
constexpr NamesHeaderFields kEventsFields{"events.session", "events.core",    "events.thread_id",
                                          "events.names",   "events.name_id", "events.name"};
constexpr NamesHeaderFields kInputStagesFields{"input_stages.session", "input_stages.core",    "input_stages.thread_id",
                                               "input_stages.names",   "input_stages.name_id", "input_stages.name"};
constexpr NamesHeaderFields kAllocationsFields{"allocations.session", "allocations.core",    "allocations.thread_id",
                                               "allocations.names",   "allocations.name_id", "allocations.name"};

template <typename Batch>
bool decode_names_header(Reader& r, Batch& m, const NamesHeaderFields& fields) {
  uint32_t names = 0;
  if (!r.get(m.session, fields.session) || !r.get(m.core, fields.core) || !r.get(m.thread_id, fields.thread_id) ||
      !r.get_count(names, 8, fields.names))
    return false;
  m.names.resize(names);
  for (auto& [id, name] : m.names)
    if (!r.get(id, fields.name_id) || !r.get_string(name, fields.name)) return false;
  return true;
}

bool decode(Reader& r, EventsMsg& m, std::string& error) {
  uint32_t events = 0;
  if (!decode_names_header(r, m, kEventsFields) || !r.get_count(events, kEncodedEventBytes, "events.count"))
    return false;
  m.events.resize(events);
  for (EventMsg& e : m.events) {
    uint8_t kind = 0, pad8 = 0;
    uint16_t pad16 = 0;
    if (!r.get(kind, "event.kind") || !r.get(pad8, "event.pad") || !r.get(pad16, "event.pad") ||
        !r.get(e.id, "event.id") || !r.get(e.arg, "event.arg") || !r.get(e.start_ns, "event.start_ns") ||
        !r.get(e.duration_ns, "event.duration_ns") || !r.get(e.value, "event.value") ||
        !r.get(e.value2, "event.value2"))
      return false;
    if (kind == 0 || kind > kMaxEventKind) {
      error = "event.kind: unknown kind " + std::to_string(kind);
      return false;
    }
    if (e.duration_ns < 0) {
      error = "event.duration_ns: negative duration " + std::to_string(e.duration_ns);
      return false;
    }
    e.kind = static_cast<EventKind>(kind);
  }
  return true;
}
bool decode(Reader& r, InputStagesMsg& m, std::string& error) {
  uint32_t stages = 0;
  if (!decode_names_header(r, m, kInputStagesFields) ||
      !r.get_count(stages, kEncodedInputStageBytes, "input_stages.count"))
    return false;
  m.stages.resize(stages);
  for (InputStageMsg& s : m.stages) {
    uint8_t category = 0, pad8 = 0;
    uint16_t pad16 = 0;
    if (!r.get(s.name_id, "input_stage.name_id") || !r.get(category, "input_stage.category") ||
        !r.get(pad8, "input_stage.pad") || !r.get(pad16, "input_stage.pad") ||
        !r.get(s.stage_id, "input_stage.stage_id") || !r.get(s.parent_id, "input_stage.parent_id") ||
        !r.get(s.start_ns, "input_stage.start_ns") || !r.get(s.duration_ns, "input_stage.duration_ns"))
      return false;
    if (category > kMaxInputStageCategory) {
      error = "input_stage.category: unknown category " + std::to_string(category);
      return false;
    }
    if (s.stage_id == 0) {
      error = "input_stage.stage_id: 0 is not a stage id";
      return false;
    }
    if (s.duration_ns < 0) {
      error = "input_stage.duration_ns: negative duration " + std::to_string(s.duration_ns);
      return false;
    }
    s.category = static_cast<InputStageCategory>(category);
  }
  return true;
}
bool decode(Reader& r, AllocationsMsg& m, std::string& error) {
  uint32_t allocations = 0;
  if (!decode_names_header(r, m, kAllocationsFields) ||
      !r.get_count(allocations, kEncodedAllocationBytes, "allocations.count"))
    return false;
  m.allocations.resize(allocations);
  for (AllocationMsg& a : m.allocations) {
    uint8_t op = 0, pad8 = 0;
    uint16_t pad16 = 0;
    if (!r.get(op, "allocation.op") || !r.get(pad8, "allocation.pad") || !r.get(pad16, "allocation.pad") ||
        !r.get(a.allocator_id, "allocation.allocator_id") || !r.get(a.op_name_id, "allocation.op_name_id") ||
        !r.get(a.address, "allocation.address") || !r.get(a.bytes, "allocation.bytes") ||
        !r.get(a.time_ns, "allocation.time_ns"))
      return false;
    if (op > kMaxAllocationOp) {
      error = "allocation.op: unknown operation " + std::to_string(op);
      return false;
    }
    if (a.allocator_id == 0) {
      error = "allocation.allocator_id: 0 names no allocator";
      return false;
    }
    if (a.bytes < 0) {
      error = "allocation.bytes: negative size " + std::to_string(a.bytes);
      return false;
    }
    a.op = static_cast<AllocationOp>(op);
  }
  return true;
}
bool decode(Reader& r, ProfilerServerMsg& m, std::string& error) {
  if (!r.get(m.port, "profiler_server.port")) return false;
  if (m.port == 0 || m.port > 65535) {
    error = "profiler_server.port: " + std::to_string(m.port) + " is no TCP port";
    return false;
  }
  return true;
}
bool decode(Reader& r, CaptureDoneMsg& m, std::string& error) {
  if (!r.get(m.session, "capture_done.session") || !r.get(m.dropped_events, "capture_done.dropped_events")) {
    return false;
  }
  if (m.dropped_events > kMaxDroppedEvents) {
    error = "capture_done.dropped_events: " + std::to_string(m.dropped_events) + " is more than any window drops (" +
            std::to_string(kMaxDroppedEvents) + ")";
    return false;
  }
  return true;
}
bool decode(Reader& r, DevicePlanesMsg& m, std::string& error) {
  if (!r.get(m.session, "device_planes.session") || !r.get(m.total_bytes, "device_planes.total_bytes") ||
      !r.get(m.offset, "device_planes.offset") || !r.get_string(m.chunk, "device_planes.chunk"))
    return false;
  if (m.total_bytes > kMaxDeviceSpaceBytes) {
    error = "device_planes.total_bytes: " + std::to_string(m.total_bytes) + " exceeds the maximum of " +
            std::to_string(kMaxDeviceSpaceBytes);
    return false;
  }
  if (m.offset > m.total_bytes || m.chunk.size() > m.total_bytes - m.offset) {
    error = "device_planes: chunk of " + std::to_string(m.chunk.size()) + " bytes at offset " +
            std::to_string(m.offset) + " runs past total_bytes " + std::to_string(m.total_bytes);
    return false;
  }
  return true;
}
bool decode(Reader& r, HelloMsg& m, std::string& error) {
  if (!r.get(m.max_version, "hello.max_version") || !r.get(m.min_version, "hello.min_version")) return false;
  if (m.min_version == 0 || m.min_version > m.max_version) {
    error =
        "hello: version range " + std::to_string(m.min_version) + ".." + std::to_string(m.max_version) + " is empty";
    return false;
  }
  return true;
}
bool decode(Reader& r, WelcomeMsg& m) { return r.get(m.version, "welcome.version"); }
bool decode(Reader& r, RefusedMsg& m) {
  return r.get(m.min_version, "refused.min_version") && r.get(m.max_version, "refused.max_version") &&
         r.get_string(m.reason, "refused.reason");
}
bool decode(Reader& r, CaptureOpenMsg& m) {
  return r.get(m.session, "capture_open.session") && r.get(m.start_ns, "capture_open.start_ns") &&
         r.get(m.end_ns, "capture_open.end_ns");
}
bool decode(Reader& r, CaptureCloseMsg& m) { return r.get(m.session, "capture_close.session"); }

// Each message's frame type, in Message's order: the one map between the two, both ways.
constexpr FrameType kTypes[] = {FrameType::kRegister,    FrameType::kSteps,        FrameType::kEvents,
                                FrameType::kCaptureDone, FrameType::kDevicePlanes, FrameType::kHello,
                                FrameType::kInputStages, FrameType::kAllocations,  FrameType::kProfilerServer,
                                FrameType::kCaptureOpen, FrameType::kCaptureClose, FrameType::kWelcome,
                                FrameType::kRefused};
static_assert(std::size(kTypes) == std::variant_size_v<Message>);

// The payload as the message of frame type `type` (the I-th of Message's types onwards), read whole: bytes left
// over are malformed. Decoders that check more than the field sizes say why in `error`.
template <size_t I = 0>
std::optional<Message> decode_message(FrameType type, Reader& r, std::string& error) {
  if constexpr (I == std::variant_size_v<Message>) {
    error = "unknown frame type " + std::to_string(static_cast<int>(type));
    return std::nullopt;
  } else {
    if (kTypes[I] != type) return decode_message<I + 1>(type, r, error);
    std::variant_alternative_t<I, Message> m;
    bool ok = false;
    if constexpr (requires { decode(r, m, error); }) {
      ok = decode(r, m, error);
    } else {
      ok = decode(r, m);
    }
    if (!ok || !r.finish()) return std::nullopt;
    return Message(std::move(m));
  }
}

}  // namespace

FrameType type_of(const Message& msg) { return kTypes[msg.index()]; }

std::optional<uint32_t> common_version(const HelloMsg& offer, uint32_t min_version, uint32_t max_version) {
  const uint32_t highest = std::min(offer.max_version, max_version);
  if (highest < std::max(offer.min_version, min_version)) return std::nullopt;
  return highest;
}

void encode_frame(const Message& msg, std::string& out) {
  const size_t header_at = out.size();
  out.append(kFrameHeaderBytes, '\0');
  Writer w(out);
  std::visit([&](const auto& m) { encode_payload(m, w); }, msg);
  const uint32_t payload = static_cast<uint32_t>(out.size() - header_at - kFrameHeaderBytes);
  std::string header;
  Writer h(header);
  h.put(payload);
  h.put(static_cast<uint16_t>(type_of(msg)));
  h.put(kFrameMagic);
  std::memcpy(out.data() + header_at, header.data(), kFrameHeaderBytes);
}

std::optional<FrameHeader> decode_header(std::string_view header, uint32_t version, std::string& error,
                                         uint32_t max_payload) {
  Reader r(header, error);
  uint32_t length = 0;
  uint16_t type = 0, magic = 0;
  if (!r.get(length, "header.length") || !r.get(type, "header.type") || !r.get(magic, "header.magic"))
    return std::nullopt;
  if (magic != kFrameMagic) {
    error = "bad frame magic " + std::to_string(magic) + " (expected " + std::to_string(kFrameMagic) + ")";
    return std::nullopt;
  }
  if (!version_has(version, static_cast<FrameType>(type))) {
    error = "unknown frame type " + std::to_string(type) + " in protocol version " + std::to_string(version);
    return std::nullopt;
  }
  if (length > max_payload) {
    error =
        "frame payload of " + std::to_string(length) + " bytes exceeds the maximum of " + std::to_string(max_payload);
    return std::nullopt;
  }
  return FrameHeader{length, static_cast<FrameType>(type)};
}

std::optional<Message> decode_payload(FrameType type, std::string_view payload, std::string& error) {
  Reader r(payload, error);
  return decode_message(type, r, error);
}

}  // namespace podscope::local
