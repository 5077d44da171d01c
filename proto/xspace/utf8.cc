#include "proto/xspace/utf8.h"

#include <cstdint>

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

}  // namespace

std::string valid_utf8(std::string_view text) {
  size_t first_bad = 0;
  while (first_bad < text.size()) {
    const size_t n = sequence_length(text.substr(first_bad));
    if (n == 0) break;
    first_bad += n;
  }
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

}  // namespace podscope::xspace
