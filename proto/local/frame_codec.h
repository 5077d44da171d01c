// The wire format between annotated processes (libpodscope) and the agent's local socket. Both sides link
// this one small library (podscope_proto_local, standard library only), so the client never depends on
// agent code. Frames: an 8-byte header (u32 payload length, u16 type, u16 magic) then the payload, all
// little-endian. Decoding checks every length against the bytes present: a malformed frame is an error
// string, never a crash. See docs/local_protocol.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace podscope::local {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 8;
inline constexpr uint16_t kFrameMagic = 0x5350;  // "PS"
inline constexpr uint32_t kMaxFramePayloadBytes = 1u << 20;

enum class FrameType : uint16_t {
  // client → agent
  kRegister = 1,
  kSteps = 2,
  kEvents = 3,
  kCaptureDone = 4,
  kDevicePlanes = 5,
  // agent → client
  kCaptureOpen = 16,
  kCaptureClose = 17,
};

// What an annotation recorded. The agent names events after these (XLA spelling, see proto/xspace/names.h).
enum class EventKind : uint8_t {
  kStep = 1,       // value = step_num, id = name id
  kInfeed = 2,     // value = bytes
  kOutfeed = 3,    // value = bytes
  kCompute = 4,    // id = name id, value = flops, value2 = bytes
  kAllReduce = 5,  // id = all_reduce_id, value = bytes, arg = replica-group name id
  kSend = 6,       // id = channel_id, arg = destination core, value = bytes
  kRecvDone = 7,   // id = channel_id, arg = source core, value = bytes
  kFreeForm = 8,   // id = name id
};
inline constexpr uint8_t kMaxEventKind = 8;

struct RegisterMsg {
  uint32_t version = kProtocolVersion;
  int32_t pid = 0;
  std::string program;
  std::string job;
  std::vector<int32_t> cores;
};

// One finished step, always sent (also outside captures) for the continuous step metrics.
struct StepMsg {
  int32_t core = 0;
  int64_t step_num = 0;
  int64_t begin_ns = 0;  // Unix ns on the client's system clock
  int64_t end_ns = 0;
  int64_t infeed_ns = 0;      // time in infeed annotations inside the step (same thread)
  int64_t all_reduce_ns = 0;  // time in all-reduce annotations inside the step (same thread)
};
struct StepsMsg {
  std::vector<StepMsg> steps;
};

struct EventMsg {
  EventKind kind = EventKind::kFreeForm;
  uint32_t id = 0;
  int32_t arg = 0;
  int64_t start_ns = 0;  // Unix ns on the client's system clock
  int64_t duration_ns = 0;
  int64_t value = 0;
  int64_t value2 = 0;
};
// A batch of events recorded by one thread for one core during a capture window. `names` defines every
// name id the batch uses, so each batch decodes on its own.
struct EventsMsg {
  uint64_t session = 0;
  int32_t core = 0;
  int64_t thread_id = 0;
  std::vector<std::pair<uint32_t, std::string>> names;
  std::vector<EventMsg> events;
};

struct CaptureDoneMsg {
  uint64_t session = 0;
  uint64_t dropped_events = 0;  // events lost to full buffers during the window
};
// One chunk of a serialized tensorflow.profiler.XSpace that a device tracer in the client (libpodscope_cupti)
// produced for a capture window. A space is sent as consecutive chunks (offsets 0, n, 2n, ...) before the
// window's CaptureDone; the agent reassembles it and merges it into the capture.
struct DevicePlanesMsg {
  uint64_t session = 0;
  uint64_t total_bytes = 0;  // of the whole serialized space, at most kMaxDeviceSpaceBytes
  uint64_t offset = 0;       // of this chunk in it
  std::string chunk;
};
// A device space larger than this is refused (the agent would hold it in memory until the capture ends).
inline constexpr uint64_t kMaxDeviceSpaceBytes = 1ull << 30;
// Chunk size that keeps a DevicePlanes frame under kMaxFramePayloadBytes.
inline constexpr size_t kDevicePlanesChunkBytes = kMaxFramePayloadBytes - 64;

struct CaptureOpenMsg {
  uint64_t session = 0;
  int64_t start_ns = 0;  // agent clock, informational
  int64_t end_ns = 0;
};
struct CaptureCloseMsg {
  uint64_t session = 0;
};

using Message = std::variant<RegisterMsg, StepsMsg, EventsMsg, CaptureDoneMsg, DevicePlanesMsg, CaptureOpenMsg,
                             CaptureCloseMsg>;

// Appends one complete frame (header + payload) to `out`.
void encode_frame(const Message& msg, std::string& out);

struct FrameHeader {
  uint32_t payload_bytes = 0;
  FrameType type = FrameType::kRegister;
};
// Parses and validates a header (magic, known type, payload ≤ max_payload). On error returns nullopt and
// sets `error` to a message naming the bad field and value.
std::optional<FrameHeader> decode_header(std::string_view header, std::string& error,
                                         uint32_t max_payload = kMaxFramePayloadBytes);
std::optional<Message> decode_payload(FrameType type, std::string_view payload, std::string& error);

// Bytes of EventsMsg framing per event, so senders can cut batches below the maximum frame size.
inline constexpr size_t kEncodedEventBytes = 44;

}  // namespace podscope::local
