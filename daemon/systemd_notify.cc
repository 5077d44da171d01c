#include "daemon/systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <string>

namespace podscope {

SystemdNotifier::SystemdNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && *socket != '\0';
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_interval_ = std::chrono::milliseconds(usec / 2000);
  }
}

void SystemdNotifier::ready(std::string_view status) const {
  if (!enabled_) return;
  const std::string message = "READY=1\nSTATUS=" + std::string(status);
  sd_notify(0, message.c_str());
}

void SystemdNotifier::watchdog() const {
  if (enabled_) sd_notify(0, "WATCHDOG=1");
}

void SystemdNotifier::reloading() const {
  if (enabled_) sd_notify(0, "RELOADING=1");
}

void SystemdNotifier::stopping() const {
  if (enabled_) sd_notify(0, "STOPPING=1");
}

}  // namespace podscope
