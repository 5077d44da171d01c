// Protobuf wire format written by hand: the few encodings the Perfetto trace writer needs, into a growable
// byte buffer that writes through a raw cursor, so that a packet costs a handful of stores and no message
// objects (a trace has two packets per event).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace podscope::trace_writers::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

constexpr size_t varint_size(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

constexpr uint64_t tag(uint32_t field, WireType type) { return (static_cast<uint64_t>(field) << 3) | type; }

// Encoded size of a length-delimited field holding `size` bytes.
constexpr size_t bytes_field_size(uint32_t field, size_t size) {
  return varint_size(tag(field, kLengthDelimited)) + varint_size(size) + size;
}

class Buffer {
 public:
  void clear() { size_ = 0; }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  std::string_view view() const { return {data_.data(), size_}; }

  [[gnu::always_inline]] void varint(uint64_t value) {
    reserve(10);
    char* p = data_.data() + size_;
    while (value >= 0x80) {
      *p++ = static_cast<char>(value | 0x80);
      value >>= 7;
    }
    *p++ = static_cast<char>(value);
    size_ = static_cast<size_t>(p - data_.data());
  }

  // int64 values go as their two's complement (protobuf's int64, not zigzag).
  void varint_field(uint32_t field, uint64_t value) {
    varint(tag(field, kVarint));
    varint(value);
  }

  void fixed64_field(uint32_t field, uint64_t value) {
    varint(tag(field, kFixed64));
    reserve(8);
    for (int i = 0; i < 8; ++i) data_[size_++] = static_cast<char>(value >> (8 * i));
  }

  void double_field(uint32_t field, double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    fixed64_field(field, bits);
  }

  // Strings, bytes and embedded messages (already encoded).
  void bytes_field(uint32_t field, std::string_view bytes) {
    varint(tag(field, kLengthDelimited));
    varint(bytes.size());
    append(bytes);
  }

  // The header of a length-delimited field whose `size` bytes the caller appends next.
  void bytes_field_header(uint32_t field, size_t size) {
    varint(tag(field, kLengthDelimited));
    varint(size);
  }

  void append(std::string_view bytes) {
    reserve(bytes.size());
    std::memcpy(data_.data() + size_, bytes.data(), bytes.size());
    size_ += bytes.size();
  }

 private:
  [[gnu::always_inline]] void reserve(size_t more) {
    if (size_ + more > data_.size()) [[unlikely]]
      grow(more);
  }
  [[gnu::noinline]] void grow(size_t more) { data_.resize(std::max(2 * data_.size(), size_ + more + 64)); }

  std::string data_;
  size_t size_ = 0;
};

}  // namespace podscope::trace_writers::wire
