#include "kineto/ipc/fabric_message.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace podscope::kineto::ipc {
namespace {

// Fields are the sender's native little-endian integers; read and write them byte by byte so that the codec
// does not depend on the reading host's alignment.
template <typename T>
T read_le(std::string_view bytes, size_t offset) {
  using U = std::make_unsigned_t<T>;
  U value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<U>(static_cast<uint8_t>(bytes[offset + i])) << (8 * i);
  }
  return static_cast<T>(value);
}

template <typename T>
void append_le(std::string& out, T value) {
  using U = std::make_unsigned_t<T>;
  const U bits = static_cast<U>(value);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

// The type field up to its first NUL; empty when it has none (a type must leave room for its terminator).
std::string_view type_name(std::string_view header) {
  const std::string_view field = header.substr(kSizeFieldBytes, kTypeBytes);
  const size_t nul = field.find('\0');
  return nul == std::string_view::npos ? std::string_view() : field.substr(0, nul);
}

Decoded decode_poll(std::string_view payload) {
  if (payload.size() < kPollFixedBytes) return Refusal::kShort;
  Poll poll;
  poll.config_type = read_le<int32_t>(payload, 0);
  const int32_t n = read_le<int32_t>(payload, 4);
  poll.job_id = read_le<int64_t>(payload, 8);
  if (n <= 0 || n > kMaxPollPids) return Refusal::kBadPids;
  if (payload.size() != kPollFixedBytes + sizeof(int32_t) * static_cast<size_t>(n)) return Refusal::kBadPids;
  poll.pids.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pid = read_le<int32_t>(payload, kPollFixedBytes + sizeof(int32_t) * static_cast<size_t>(i));
    if (pid <= 0) return Refusal::kBadPids;
    poll.pids.push_back(pid);
  }
  return poll;
}

Decoded decode_registration(std::string_view payload) {
  if (payload.size() < kRegistrationBytes) return Refusal::kShort;
  if (payload.size() > kRegistrationBytes) return Refusal::kSizeMismatch;
  Registration r;
  r.gpu = read_le<int32_t>(payload, 0);
  r.pid = read_le<int32_t>(payload, 4);
  r.job_id = read_le<int64_t>(payload, 8);
  if (r.pid <= 0) return Refusal::kBadPids;
  return r;
}

}  // namespace

std::string_view refusal_name(Refusal refusal) {
  switch (refusal) {
    case Refusal::kShort: return "short";
    case Refusal::kOversized: return "oversized";
    case Refusal::kSizeMismatch: return "size_mismatch";
    case Refusal::kUnknownType: return "unknown_type";
    case Refusal::kBadPids: return "bad_pids";
  }
  return "unknown";
}

Decoded decode_message(std::string_view bytes, size_t datagram_length) {
  if (datagram_length > kMaxMessageBytes || bytes.size() > kMaxMessageBytes) return Refusal::kOversized;
  if (bytes.size() < kHeaderBytes) return Refusal::kShort;
  const uint64_t size = read_le<uint64_t>(bytes, 0);
  const std::string_view payload = bytes.substr(kHeaderBytes);
  if (size != payload.size()) return Refusal::kSizeMismatch;
  const std::string_view type = type_name(bytes);
  if (type == kPollType) return decode_poll(payload);
  if (type == kRegistrationType) return decode_registration(payload);
  return Refusal::kUnknownType;
}

std::string encode_message(std::string_view type, std::string_view payload) {
  std::string out;
  out.reserve(kHeaderBytes + payload.size());
  append_le<uint64_t>(out, payload.size());
  char field[kTypeBytes] = {};
  std::memcpy(field, type.data(), std::min(type.size(), kTypeBytes - 1));
  out.append(field, kTypeBytes);
  out.append(payload);
  return out;
}

std::string encode_poll_answer(std::string_view config_text) { return encode_message(kPollType, config_text); }

std::string encode_registration_answer(int32_t value) {
  std::string payload;
  append_le<int32_t>(payload, value);
  return encode_message(kRegistrationType, payload);
}

std::string encode_poll(const Poll& poll) {
  std::string payload;
  append_le<int32_t>(payload, poll.config_type);
  append_le<int32_t>(payload, static_cast<int32_t>(poll.pids.size()));
  append_le<int64_t>(payload, poll.job_id);
  for (int32_t pid : poll.pids) append_le<int32_t>(payload, pid);
  return encode_message(kPollType, payload);
}

std::string encode_registration(const Registration& registration) {
  std::string payload;
  append_le<int32_t>(payload, registration.gpu);
  append_le<int32_t>(payload, registration.pid);
  append_le<int64_t>(payload, registration.job_id);
  return encode_message(kRegistrationType, payload);
}

}  // namespace podscope::kineto::ipc
