// The messages of dynolog's IPC fabric as PyTorch's Kineto speaks them when KINETO_USE_DAEMON is set. Each
// message is one Unix datagram: a header — the payload's byte count as the sender's native size_t (8 bytes,
// little-endian on the 64-bit hosts PyTorch runs on), then the message type, NUL-padded to 32 bytes — followed
// by the payload. Kineto sends two kinds, and the daemon answers each on the sender's own address with a message
// of the same type:
//   "req"  a poll: int32 config type (bit set: 1 events, 2 activities), int32 n, int64 job id, int32 pids[n]
//          (the polling process first, then its ancestors). Answer: the pending config text, empty if none.
//   "ctxt" a registration (GPU processes): int32 gpu, int32 pid, int64 job id. Answer: an int32.
// Pure: bytes in, messages out, and the answers' bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace podscope::kineto::ipc {

inline constexpr size_t kSizeFieldBytes = 8;
inline constexpr size_t kTypeBytes = 32;
inline constexpr size_t kHeaderBytes = kSizeFieldBytes + kTypeBytes;
inline constexpr size_t kPollFixedBytes = 16;     // config type, n, job id
inline constexpr size_t kRegistrationBytes = 16;  // gpu, pid, job id

// The longest ancestor chain a poll may carry. Kineto sends the process and every ancestor up to init; real
// chains are a handful deep.
inline constexpr int32_t kMaxPollPids = 128;
// The largest datagram the daemon accepts; anything longer is refused unread.
inline constexpr size_t kMaxMessageBytes = kHeaderBytes + kPollFixedBytes + sizeof(int32_t) * kMaxPollPids;

inline constexpr std::string_view kPollType = "req";
inline constexpr std::string_view kRegistrationType = "ctxt";

// Config types a poll asks for.
inline constexpr int32_t kEventsConfig = 1;
inline constexpr int32_t kActivitiesConfig = 2;

struct Poll {
  int32_t config_type = 0;
  int64_t job_id = 0;
  std::vector<int32_t> pids;  // the polling process, then its ancestors; never empty
};

struct Registration {
  int32_t gpu = 0;
  int32_t pid = 0;
  int64_t job_id = 0;
};

// Why a datagram was refused. Each is counted by the daemon under its name.
enum class Refusal : uint8_t {
  kShort,         // shorter than its header, or than its type's fixed payload
  kOversized,     // longer than kMaxMessageBytes
  kSizeMismatch,  // the header's size is not the payload's length
  kUnknownType,   // neither "req" nor "ctxt"
  kBadPids,       // a poll with no pid, more than kMaxPollPids, a count that disagrees with its length, or pid ≤ 0
};
inline constexpr std::array kRefusals = {Refusal::kShort, Refusal::kOversized, Refusal::kSizeMismatch,
                                         Refusal::kUnknownType, Refusal::kBadPids};
std::string_view refusal_name(Refusal refusal);

using Decoded = std::variant<Poll, Registration, Refusal>;

// Decodes one datagram. `bytes` is what was read, `datagram_length` the datagram's full length (larger when
// the read buffer truncated it).
Decoded decode_message(std::string_view bytes, size_t datagram_length);

// A whole message (header and payload) of this type.
std::string encode_message(std::string_view type, std::string_view payload);
// The answer to a poll: the config text, empty when nothing is pending.
std::string encode_poll_answer(std::string_view config_text);
// The answer to a registration.
std::string encode_registration_answer(int32_t value);

// The request messages, as Kineto builds them (for tests and tools that speak the client side).
std::string encode_poll(const Poll& poll);
std::string encode_registration(const Registration& registration);

}  // namespace podscope::kineto::ipc
