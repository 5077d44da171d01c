// Leveled logging to stderr (journald adds its own timestamps under systemd; we add ours for terminals).
// Usage: PODSCOPE_LOG(kInfo) << "listening on " << addr;  Each line is written with one write(2).
#pragma once

#include <sstream>
#include <string_view>

#include "absl/status/statusor.h"

namespace podscope {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// The process-wide threshold; set once from config (and again on SIGHUP).
void set_log_level(LogLevel level);
LogLevel log_level();
absl::StatusOr<LogLevel> parse_log_level(std::string_view name);

class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine();
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;

  template <typename T>
  LogLine& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Ends a PODSCOPE_LOG expression in void, so both branches of its conditional have one type; `&` binds after `<<`.
struct LogLineEnd {
  void operator&(const LogLine&) const {}
};

}  // namespace podscope

// An expression, not an if: it stays one statement as the branch of an unbraced if. A line below the threshold is
// never built.
#define PODSCOPE_LOG(level)                               \
  (::podscope::LogLevel::level < ::podscope::log_level()) \
      ? static_cast<void>(0)                              \
      : ::podscope::LogLineEnd() & ::podscope::LogLine(::podscope::LogLevel::level)
