#include "agent/collectors/memory_collector.h"

namespace podscope::agent {
namespace {
constexpr std::array<std::string_view, 7> kMetricNames = {
    "podscope_memory_total_bytes",    "podscope_memory_free_bytes",   "podscope_memory_available_bytes",
    "podscope_memory_buffers_bytes",  "podscope_memory_cached_bytes", "podscope_memory_swap_total_bytes",
    "podscope_memory_swap_free_bytes"};
}  // namespace

absl::Status parse_meminfo(std::string_view text, std::string_view path, MemInfo& info) {
  info.bytes.fill(-1);
  std::string_view line;
  int line_number = 0;
  while (next_line(text, line)) {
    ++line_number;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      if (line.empty()) continue;
      return parse_error(path, line_number, "expected 'Name: value kB', got '" + std::string(line) + "'");
    }
    const std::string_view key = line.substr(0, colon);
    size_t index = kMemInfoFields.size();
    for (size_t i = 0; i < kMemInfoFields.size(); ++i) {
      if (kMemInfoFields[i] == key) index = i;
    }
    if (index == kMemInfoFields.size()) continue;
    std::string_view rest = line.substr(colon + 1), number, unit;
    int64_t value = 0;
    if (!next_field(rest, number) || !parse_number(number, value)) {
      return parse_error(path, line_number, "field '" + std::string(key) + "' has no numeric value");
    }
    const bool kib = next_field(rest, unit) && unit == "kB";
    if (kib && __builtin_mul_overflow(value, int64_t{1024}, &info.bytes[index])) {
      return parse_error(path, line_number,
                         "field '" + std::string(key) + "' is too large: " + std::string(number) + " kB");
    }
    if (!kib) info.bytes[index] = value;
  }
  if (info.bytes[0] < 0) return parse_error(path, line_number, "no MemTotal line (truncated?)");
  return absl::OkStatus();
}

MemoryCollector::MemoryCollector(std::string path) : ProcFileCollector(std::move(path)) {}

absl::Status MemoryCollector::record(std::string_view text, int64_t now_ns, SampleSink& sink) {
  if (absl::Status s = parse_meminfo(text, path(), info_); !s.ok()) return s;
  if (!declared_) {
    for (size_t i = 0; i < ids_.size(); ++i) {
      ids_[i] = sink.declare({.metric = std::string(kMetricNames[i]),
                              .help = "/proc/meminfo " + std::string(kMemInfoFields[i]) + " in bytes."});
    }
    used_ = sink.declare({.metric = "podscope_memory_used_bytes",
                          .help = "Memory in use: MemTotal minus MemAvailable, in bytes.",
                          .plane = "/host:CPU",
                          .track = "Memory used (bytes)"});
    declared_ = true;
  }
  for (size_t i = 0; i < ids_.size(); ++i) {
    if (info_.bytes[i] >= 0) sink.record(ids_[i], now_ns, static_cast<double>(info_.bytes[i]));
  }
  // Kernels before 3.14 lack MemAvailable; free + buffers + cached is what it replaced.
  const int64_t available = info_.bytes[2] >= 0
                                ? info_.bytes[2]
                                : std::max<int64_t>(info_.bytes[1], 0) + std::max<int64_t>(info_.bytes[3], 0) +
                                      std::max<int64_t>(info_.bytes[4], 0);
  sink.record(used_, now_ns, static_cast<double>(info_.bytes[0] - available));
  return absl::OkStatus();
}

}  // namespace podscope::agent
