#include "daemon/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "absl/status/status.h"

namespace podscope {
namespace {

std::atomic<LogLevel> g_threshold{LogLevel::kInfo};

char level_letter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 'D';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kError: return 'E';
  }
  return '?';
}

// Control characters (a newline in a client-chosen session id, an escape sequence) would let a client forge log
// lines or rewrite a terminal: they are written as \xNN, so every log line is exactly one line.
void append_escaped(std::string_view text, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
}

}  // namespace

void set_log_level(LogLevel level) { g_threshold.store(level, std::memory_order_relaxed); }
LogLevel log_level() { return g_threshold.load(std::memory_order_relaxed); }

absl::StatusOr<LogLevel> parse_log_level(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return absl::InvalidArgumentError("log level must be one of debug, info, warning, error; got '" + std::string(name) +
                                    "'");
}

LogLine::~LogLine() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const int millis =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm;
  gmtime_r(&secs, &tm);
  char prefix[48];
  std::snprintf(prefix, sizeof prefix, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %c ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis, level_letter(level_));
  std::string line = prefix;
  append_escaped(stream_.str(), line);
  line += '\n';
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace podscope
