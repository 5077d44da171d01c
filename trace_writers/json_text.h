// Minimal JSON text output for the files the coordinator writes (capture.json, the merged trace): escaping
// and exact integer formatting. The files are flat and written in one pass, so a DOM library buys nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace podscope::trace_writers {

// Appends `text` as a quoted JSON string.
void append_json_string(std::string& out, std::string_view text);
// Appends ns as µs with three decimals, exactly (no double rounding): 1234567 → "1234.567".
void append_ns_as_us(std::string& out, int64_t ns);

}  // namespace podscope::trace_writers
