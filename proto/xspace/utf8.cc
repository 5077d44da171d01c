#include "proto/xspace/utf8.h"

#include <climits>
#include <cstdint>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"

namespace podscope::xspace {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of the well-formed sequence at the start of `s` (1..4), or 0 when it is not one (RFC 3629 table 3-7).
size_t sequence_length(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const auto continuation = [&](size_t i, uint8_t lo = 0x80, uint8_t hi = 0xBF) {
    return i < s.size() && byte(i) >= lo && byte(i) <= hi;
  };
  const uint8_t b0 = byte(0);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return continuation(1) ? 2 : 0;
  if (b0 == 0xE0) return continuation(1, 0xA0, 0xBF) && continuation(2) ? 3 : 0;
  if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) return continuation(1) && continuation(2) ? 3 : 0;
  if (b0 == 0xED) return continuation(1, 0x80, 0x9F) && continuation(2) ? 3 : 0;  // no surrogates
  if (b0 == 0xF0) return continuation(1, 0x90, 0xBF) && continuation(2) && continuation(3) ? 4 : 0;
  if (b0 >= 0xF1 && b0 <= 0xF3) return continuation(1) && continuation(2) && continuation(3) ? 4 : 0;
  if (b0 == 0xF4) return continuation(1, 0x80, 0x8F) && continuation(2) && continuation(3) ? 4 : 0;
  return 0;
}

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

// protobuf's own default: deeper nesting is refused by ParseFromString as well.
constexpr int kMaxNesting = 100;

// Appends to `out` the message `bytes` of type `type` with every string field, at any depth, made valid UTF-8;
// `repaired` counts the strings that changed. Everything else is copied as it was on the wire.
absl::Status append_repaired(std::string_view bytes, const Descriptor& type, int nesting, std::string& out,
                             int& repaired) {
  if (nesting > kMaxNesting) return absl::InvalidArgumentError(type.full_name() + " nested deeper than 100 messages");
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  google::protobuf::io::StringOutputStream sink(&out);
  google::protobuf::io::CodedOutputStream copy(&sink);
  const auto broken = [&] {
    return absl::InvalidArgumentError(type.full_name() + " of " + std::to_string(bytes.size()) +
                                      " bytes breaks off at byte " + std::to_string(in.CurrentPosition()));
  };
  while (in.CurrentPosition() < static_cast<int>(bytes.size())) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) return broken();
    const FieldDescriptor* field = type.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    const bool text_or_message =
        field != nullptr && WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
        (field->type() == FieldDescriptor::TYPE_STRING || field->type() == FieldDescriptor::TYPE_MESSAGE);
    if (!text_or_message) {
      if (!WireFormatLite::SkipField(&in, tag, &copy)) return broken();
      continue;
    }
    uint32_t length = 0;
    std::string value;
    if (!in.ReadVarint32(&length) || !in.ReadString(&value, static_cast<int>(length))) return broken();
    std::string rewritten;
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      rewritten = valid_utf8(value);
      repaired += rewritten != value;
    } else if (absl::Status s = append_repaired(value, *field->message_type(), nesting + 1, rewritten, repaired);
               !s.ok()) {
      return s;
    }
    copy.WriteTag(tag);
    copy.WriteVarint32(static_cast<uint32_t>(rewritten.size()));
    copy.WriteString(rewritten);
  }
  return absl::OkStatus();
}

// Where the first byte that starts no well-formed sequence is; text.size() when there is none.
size_t first_invalid(std::string_view text) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t n = sequence_length(text.substr(at));
    if (n == 0) break;
    at += n;
  }
  return at;
}

}  // namespace

bool is_valid_utf8(std::string_view text) { return first_invalid(text) == text.size(); }

std::string valid_utf8(std::string_view text) {
  const size_t first_bad = first_invalid(text);
  if (first_bad == text.size()) return std::string(text);
  std::string out(text.substr(0, first_bad));
  for (size_t at = first_bad; at < text.size();) {
    const size_t n = sequence_length(text.substr(at));
    if (n == 0) {
      out += kReplacement;
      ++at;
    } else {
      out.append(text.substr(at, n));
      at += n;
    }
  }
  return out;
}

absl::StatusOr<int> parse_replacing_invalid_utf8(std::string_view bytes, google::protobuf::Message& message) {
  const std::string& type = message.GetDescriptor()->full_name();
  if (bytes.size() > INT_MAX) {
    return absl::InvalidArgumentError(type + " of " + std::to_string(bytes.size()) + " bytes is past protobuf's 2 GiB");
  }
  if (message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return 0;
  std::string repaired_bytes;
  int repaired = 0;
  if (absl::Status s = append_repaired(bytes, *message.GetDescriptor(), 0, repaired_bytes, repaired); !s.ok()) return s;
  if (!message.ParseFromString(repaired_bytes)) {
    return absl::InvalidArgumentError(type + " of " + std::to_string(bytes.size()) +
                                      " bytes does not parse, with its strings made valid UTF-8 or without");
  }
  return repaired;
}

}  // namespace podscope::xspace
