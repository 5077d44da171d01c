#include "cli/terminal_text.h"

#include <cstdint>
#include <cstdio>

namespace podscope::cli {
namespace {

void append_escaped(std::string& out, const char* format, unsigned value) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, format, value);
  out += buffer;
}

// The length of the valid UTF-8 sequence at the start of `text` (1 to 4), or 0 when it is not one.
size_t utf8_length(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  size_t length = 0;
  uint32_t min = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  uint32_t code = lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

}  // namespace

std::string terminal_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<uint8_t>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) append_escaped(out, "\\x%02x", c);
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    const size_t length = utf8_length(text.substr(i));
    if (length == 0) {
      append_escaped(out, "\\x%02x", c);
      ++i;
    } else if (length == 2 && c == 0xC2 && static_cast<uint8_t>(text[i + 1]) < 0xA0) {
      append_escaped(out, "\\u%04x", static_cast<uint8_t>(text[i + 1]));  // C1: U+0080..U+009F
      i += 2;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  return out;
}

std::ostream& print(std::ostream& out, std::string_view text) { return out << terminal_safe(text); }

}  // namespace podscope::cli
