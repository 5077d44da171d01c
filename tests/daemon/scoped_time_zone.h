// ScopedTimeZone: sets TZ (and tzset) for a test's duration and restores the previous value, so a test can
// check local-time behaviour in a zone far from UTC.
#pragma once

#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>

namespace podscope::testing {

class ScopedTimeZone {
 public:
  explicit ScopedTimeZone(const char* zone) {
    if (const char* old = std::getenv("TZ")) previous_ = old;
    setenv("TZ", zone, 1);
    tzset();
  }
  ~ScopedTimeZone() {
    if (previous_) {
      setenv("TZ", previous_->c_str(), 1);
    } else {
      unsetenv("TZ");
    }
    tzset();
  }
  ScopedTimeZone(const ScopedTimeZone&) = delete;
  ScopedTimeZone& operator=(const ScopedTimeZone&) = delete;

 private:
  std::optional<std::string> previous_;
};

}  // namespace podscope::testing
