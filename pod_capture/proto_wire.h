// Appends protobuf wire format to a string: the few encodings the Perfetto trace writer needs, written by
// hand so that a packet costs a handful of appends and no message objects.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace podscope::pod_capture::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

inline void append_varint(std::string& out, uint64_t value) {
  char buf[10];
  size_t n = 0;
  while (value >= 0x80) {
    buf[n++] = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  buf[n++] = static_cast<char>(value);
  out.append(buf, n);
}

inline void append_tag(std::string& out, uint32_t field, WireType type) {
  append_varint(out, (static_cast<uint64_t>(field) << 3) | type);
}

// int64 values are written as their two's complement (as protobuf's int64, not zigzag).
inline void append_varint_field(std::string& out, uint32_t field, uint64_t value) {
  append_tag(out, field, kVarint);
  append_varint(out, value);
}

inline void append_fixed64_field(std::string& out, uint32_t field, uint64_t value) {
  append_tag(out, field, kFixed64);
  char buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>(value >> (8 * i));
  out.append(buf, 8);
}

inline void append_double_field(std::string& out, uint32_t field, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  append_fixed64_field(out, field, bits);
}

// Strings, bytes and embedded messages (already encoded).
inline void append_bytes_field(std::string& out, uint32_t field, std::string_view bytes) {
  append_tag(out, field, kLengthDelimited);
  append_varint(out, bytes.size());
  out.append(bytes);
}

}  // namespace podscope::pod_capture::wire
