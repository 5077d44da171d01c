// The wire format between annotated processes (libpodscope) and the agent's local socket. Both sides link
// this one small library (podscope_proto_local, standard library only), so the client never depends on
// agent code. Frames: an 8-byte header (u32 payload length, u16 type, u16 magic) then the payload, all
// little-endian. Decoding checks every length against the bytes present: a malformed frame is an error
// string, never a crash. Versions only add frame types (kVersions); a frame's layout never changes.
// See docs/local_protocol.md.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace podscope::local {

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
  kHello = 6,
  kInputStages = 7,
  kAllocations = 8,
  kProfilerServer = 9,
  // agent → client
  kCaptureOpen = 16,
  kCaptureClose = 17,
  kWelcome = 18,
  kRefused = 19,
};

// Every protocol version, oldest first, with the frame types it adds; a version speaks its own frames and
// those of every version before it. Adding a version: give its new frames FrameType values, messages and
// codecs, and append one row here (kProtocolVersion follows).
struct VersionFrames {
  uint32_t version;
  std::span<const FrameType> adds;
};
inline constexpr FrameType kVersion1Frames[] = {
    FrameType::kRegister,     FrameType::kSteps,       FrameType::kEvents,      FrameType::kCaptureDone,
    FrameType::kDevicePlanes, FrameType::kCaptureOpen, FrameType::kCaptureClose};
// Negotiation: Hello (the client's range) answered by Welcome (the chosen version) or Refused.
inline constexpr FrameType kVersion2Frames[] = {FrameType::kHello, FrameType::kWelcome, FrameType::kRefused};
// Input-pipeline stages with their category and parent.
inline constexpr FrameType kVersion3Frames[] = {FrameType::kInputStages};
// Allocations and frees reported by the process's allocators, for the memory profile.
inline constexpr FrameType kVersion4Frames[] = {FrameType::kAllocations};
// The process's framework profiler server (TensorFlow's or JAX's), for the agent to proxy while it lives.
inline constexpr FrameType kVersion5Frames[] = {FrameType::kProfilerServer};
inline constexpr VersionFrames kVersions[] = {
    {1, kVersion1Frames}, {2, kVersion2Frames}, {3, kVersion3Frames}, {4, kVersion4Frames}, {5, kVersion5Frames}};

// The newest version, spoken by this build of both sides.
inline constexpr uint32_t kProtocolVersion = std::size(kVersions);
// The oldest version this build still speaks: the agent serves [kOldestProtocolVersion, kProtocolVersion] and
// the client offers the same range. It is at most kProtocolVersion - 1, so that upgrading either side first
// (a rolling upgrade) never loses data.
inline constexpr uint32_t kOldestProtocolVersion = 1;
static_assert(kOldestProtocolVersion < kProtocolVersion);

// Whether `version` (or a later, unknown one) has frames of `type`.
constexpr bool version_has(uint32_t version, FrameType type) {
  for (const VersionFrames& v : kVersions) {
    if (v.version > version) return false;
    for (FrameType t : v.adds)
      if (t == type) return true;
  }
  return false;
}
// The first version with frames of `type`, named in messages that ask for an upgrade.
constexpr uint32_t first_version_with(FrameType type) {
  for (const VersionFrames& v : kVersions)
    if (version_has(v.version, type)) return v.version;
  return 0;
}
static_assert(
    [] {
      for (size_t i = 0; i < std::size(kVersions); ++i)
        if (kVersions[i].version != i + 1) return false;
      return true;
    }(),
    "kVersions rows are versions 1, 2, 3, ... in order");

// What an annotation recorded. The agent names events after these (XLA spelling, see proto/xspace/names.h);
// what each kind's fields mean is its row of kEventKinds below.
enum class EventKind : uint8_t {
  kStep = 1,
  kInfeed = 2,
  kOutfeed = 3,
  kCompute = 4,
  kAllReduce = 5,
  kSend = 6,
  kRecvDone = 7,
  kFreeForm = 8,
  kInputStage = 9,
  kAllocation = 10,
  kDeallocation = 11,
};

// What one of an event's fields (`id`, `arg`, `value`, `value2`) holds.
enum class EventField : uint8_t {
  kUnused,
  kNameId,           // the event's name: a name id of its batch
  kReplicaGroupId,   // a name id of its batch: the replica group's name
  kAllocatorNameId,  // a name id of its batch: the allocator's name ("GPU_0_bfc")
  kOpNameId,         // a name id of its batch: the op an allocation was made for (0: not known)
  kStepNum,
  kBytes,
  kFlops,
  kAllReduceId,
  kChannelId,
  kDestinationCore,
  kSourceCore,
  kInputStageCategory,  // an InputStageCategory
  kStageId,
  kParentStageId,
  kAddress,
};
// Whether a field holds a name id, which the batch that carries the event defines.
constexpr bool is_name_id(EventField field) {
  return field == EventField::kNameId || field == EventField::kReplicaGroupId ||
         field == EventField::kAllocatorNameId || field == EventField::kOpNameId;
}

// One kind's contract, read by the client (which fills the fields), the agent's event store (which holds them and
// charges their cost) and the agent's client planes (which write them as an XEvent and its stats).
struct EventKindTraits {
  EventKind kind;
  EventField id, arg, value, value2;
  // Whether an Events frame carries it; the other kinds arrive in frames of their own (InputStages, Allocations)
  // and are held as events of their kind.
  bool in_events_frame;
  // The stats its XEvent carries, a string stat counting twice: what the agent charges per held event.
  uint8_t stats;
  // Its event's name when its name id names nothing (kinds named by `id` only); the other kinds have one fixed
  // name each (proto/xspace/names.h).
  std::string_view unnamed;
};
// One row per kind, in order: id, arg, value, value2, carried by an Events frame, stats, name when unnamed.
inline constexpr auto kEventKinds = [] {
  using F = EventField;
  return std::array{
      EventKindTraits{EventKind::kStep, F::kNameId, F::kUnused, F::kStepNum, F::kUnused, true, 1, "train"},
      EventKindTraits{EventKind::kInfeed, F::kUnused, F::kUnused, F::kBytes, F::kUnused, true, 2, ""},
      EventKindTraits{EventKind::kOutfeed, F::kUnused, F::kUnused, F::kBytes, F::kUnused, true, 2, ""},
      EventKindTraits{EventKind::kCompute, F::kNameId, F::kUnused, F::kFlops, F::kBytes, true, 3, "compute"},
      EventKindTraits{EventKind::kAllReduce, F::kAllReduceId, F::kReplicaGroupId, F::kBytes, F::kUnused, true, 4, ""},
      EventKindTraits{EventKind::kSend, F::kChannelId, F::kDestinationCore, F::kBytes, F::kUnused, true, 5, ""},
      EventKindTraits{EventKind::kRecvDone, F::kChannelId, F::kSourceCore, F::kBytes, F::kUnused, true, 5, ""},
      EventKindTraits{EventKind::kFreeForm, F::kNameId, F::kUnused, F::kUnused, F::kUnused, true, 1, "annotation"},
      // Stats: step_num, the two stage ids, and the category (a string).
      EventKindTraits{EventKind::kInputStage, F::kNameId, F::kInputStageCategory, F::kStageId, F::kParentStageId, false,
                      5, "annotation"},
      // Stats: the allocator's totals, the address, the sizes, and the allocator's and op's names (strings).
      EventKindTraits{EventKind::kAllocation, F::kAllocatorNameId, F::kOpNameId, F::kBytes, F::kAddress, false, 11, ""},
      EventKindTraits{EventKind::kDeallocation, F::kAllocatorNameId, F::kOpNameId, F::kUnused, F::kAddress, false, 11,
                      ""}};
}();
static_assert(
    [] {
      for (size_t i = 0; i < std::size(kEventKinds); ++i)
        if (static_cast<size_t>(kEventKinds[i].kind) != i + 1) return false;
      return true;
    }(),
    "kEventKinds has one row per kind, kinds 1, 2, 3, ... in order");
static_assert(
    [] {
      for (const EventKindTraits& t : kEventKinds)
        if ((t.id == EventField::kNameId) != !t.unnamed.empty()) return false;
      return true;
    }(),
    "a kind named by its id has a name for when the id names nothing, and only such a kind");

// The row of `kind`, one of kEventKinds.
constexpr const EventKindTraits& traits_of(EventKind kind) { return kEventKinds[static_cast<size_t>(kind) - 1]; }

// The last kind an Events frame may carry: the kinds it carries come first.
inline constexpr uint8_t kMaxEventKind = [] {
  uint8_t last = 0;
  for (const EventKindTraits& t : kEventKinds)
    if (t.in_events_frame) last = static_cast<uint8_t>(t.kind);
  return last;
}();
static_assert(
    [] {
      for (const EventKindTraits& t : kEventKinds)
        if (t.in_events_frame != (static_cast<uint8_t>(t.kind) <= kMaxEventKind)) return false;
      return true;
    }(),
    "the kinds an Events frame carries are 1 to kMaxEventKind");

// The first frame of every connection since version 2: the versions the client speaks. Its layout, and
// those of Welcome and Refused, are the same in every version, so any two ends can negotiate.
struct HelloMsg {
  uint32_t max_version = kProtocolVersion;
  uint32_t min_version = kOldestProtocolVersion;
};
// The agent's answer to a Hello it can serve: from now on both ends send only frames of `version`.
struct WelcomeMsg {
  uint32_t version = 0;
};
// The agent's answer to a Hello it cannot serve, before it closes the connection.
struct RefusedMsg {
  uint32_t min_version = 0;  // the range the agent serves
  uint32_t max_version = 0;
  std::string reason;
};

// The newest version in both ranges, or nullopt when they do not overlap.
std::optional<uint32_t> common_version(const HelloMsg& offer, uint32_t min_version, uint32_t max_version);

// Registration: the version is the negotiated one (1 for a client that sent no Hello).
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
  bool operator==(const StepMsg&) const = default;
};
struct StepsMsg {
  std::vector<StepMsg> steps;
  bool operator==(const StepsMsg&) const = default;
};

struct EventMsg {
  EventKind kind = EventKind::kFreeForm;
  uint32_t id = 0;
  int32_t arg = 0;
  int64_t start_ns = 0;  // Unix ns on the client's system clock
  int64_t duration_ns = 0;
  int64_t value = 0;
  int64_t value2 = 0;
  bool operator==(const EventMsg&) const = default;
};
// A batch of events recorded by one thread for one core during a capture window. `names` defines every
// name id the batch uses, so each batch decodes on its own.
struct EventsMsg {
  uint64_t session = 0;
  int32_t core = 0;
  int64_t thread_id = 0;
  std::vector<std::pair<uint32_t, std::string>> names;
  std::vector<EventMsg> events;
  bool operator==(const EventsMsg&) const = default;
};

// What an input stage does; the agent writes it as one of xspace::kInputStageCategories, in this order.
enum class InputStageCategory : uint8_t { kRead = 0, kPreprocess = 1, kEnqueue = 2 };
inline constexpr uint8_t kMaxInputStageCategory = 2;

// One finished stage of an input pipeline (a DataLoader's read, decode, copy...). Stage ids are unique in
// the process and never 0; parent_id 0 marks a root stage.
struct InputStageMsg {
  uint32_t name_id = 0;
  InputStageCategory category = InputStageCategory::kRead;
  uint64_t stage_id = 0;
  uint64_t parent_id = 0;
  int64_t start_ns = 0;  // Unix ns on the client's system clock
  int64_t duration_ns = 0;
  bool operator==(const InputStageMsg&) const = default;
};
// A batch of input stages recorded by one thread for one core during a capture window, named as EventsMsg.
struct InputStagesMsg {
  uint64_t session = 0;
  int32_t core = 0;
  int64_t thread_id = 0;
  std::vector<std::pair<uint32_t, std::string>> names;
  std::vector<InputStageMsg> stages;
  bool operator==(const InputStagesMsg&) const = default;
};

// One allocation or free reported by an allocator of the process (libpodscope's alloc/free hook).
enum class AllocationOp : uint8_t { kAllocate = 0, kFree = 1 };
inline constexpr uint8_t kMaxAllocationOp = 1;
struct AllocationMsg {
  AllocationOp op = AllocationOp::kAllocate;
  uint32_t allocator_id = 0;  // the name of the allocator ("GPU_0_bfc"), never 0
  uint32_t op_name_id = 0;    // the op it was allocated for (0: not known)
  uint64_t address = 0;
  int64_t bytes = 0;    // of an allocation (≥ 0); 0 for a free
  int64_t time_ns = 0;  // Unix ns on the client's system clock
  bool operator==(const AllocationMsg&) const = default;
};
// A batch of allocation records made by one thread during a capture window, named as EventsMsg.
struct AllocationsMsg {
  uint64_t session = 0;
  int32_t core = 0;
  int64_t thread_id = 0;
  std::vector<std::pair<uint32_t, std::string>> names;
  std::vector<AllocationMsg> allocations;
  bool operator==(const AllocationsMsg&) const = default;
};

struct CaptureDoneMsg {
  uint64_t session = 0;
  uint64_t dropped_events = 0;  // events lost to full buffers during the window, at most kMaxDroppedEvents
};
// More than a client can drop in a window (a billion events a second for over 18 minutes, longer than any capture):
// a larger count is no count but a malformed frame, so it never reaches a counter.
inline constexpr uint64_t kMaxDroppedEvents = 1ull << 40;
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

// The process serves tensorflow.ProfilerService (tf.profiler.experimental.server.start, jax.profiler.start_server)
// on this loopback TCP port: the agent forwards every capture to it, as to a configured `upstream`, until the
// connection ends. A later one replaces it.
struct ProfilerServerMsg {
  uint32_t port = 0;  // 1..65535
};

// A CaptureOpen whose session has this bit set starts continuous recording (the agent's flight recorder): the
// client streams every event under that session until a CaptureClose of it or a capture window's CaptureOpen
// (after which the agent reopens the recording); device tracers are not started for it.
inline constexpr uint64_t kRecordingSessionBit = uint64_t{1} << 63;

struct CaptureOpenMsg {
  uint64_t session = 0;
  int64_t start_ns = 0;  // agent clock, informational
  int64_t end_ns = 0;
};
struct CaptureCloseMsg {
  uint64_t session = 0;
};

using Message =
    std::variant<RegisterMsg, StepsMsg, EventsMsg, CaptureDoneMsg, DevicePlanesMsg, HelloMsg, InputStagesMsg,
                 AllocationsMsg, ProfilerServerMsg, CaptureOpenMsg, CaptureCloseMsg, WelcomeMsg, RefusedMsg>;

FrameType type_of(const Message& msg);

// Appends one complete frame (header + payload) to `out`.
void encode_frame(const Message& msg, std::string& out);

struct FrameHeader {
  uint32_t payload_bytes = 0;
  FrameType type = FrameType::kRegister;
};
// Parses and validates a header (magic, a type that `version` has, payload ≤ max_payload). On error returns
// nullopt and sets `error` to a message naming the bad field and value: a type unknown to the version is
// malformed, exactly as in version 1.
std::optional<FrameHeader> decode_header(std::string_view header, uint32_t version, std::string& error,
                                         uint32_t max_payload = kMaxFramePayloadBytes);
std::optional<Message> decode_payload(FrameType type, std::string_view payload, std::string& error);

// Bytes of EventsMsg framing per event, so senders can cut batches below the maximum frame size.
inline constexpr size_t kEncodedEventBytes = 44;
// The same for InputStagesMsg.
inline constexpr size_t kEncodedInputStageBytes = 40;
// The same for AllocationsMsg.
inline constexpr size_t kEncodedAllocationBytes = 36;

}  // namespace podscope::local
