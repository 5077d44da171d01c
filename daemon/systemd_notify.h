// systemd service notification (sd_notify) for Type=notify units: READY=1 once serving, WATCHDOG=1 on half
// the unit's WatchdogSec, STOPPING=1 at shutdown. Without NOTIFY_SOCKET (not under systemd) all are no-ops.
#pragma once

#include <chrono>
#include <string_view>

namespace podscope {

class SystemdNotifier {
 public:
  SystemdNotifier();
  bool enabled() const { return enabled_; }
  // Half of WatchdogSec when the unit asks for pings (WATCHDOG_USEC for this pid), else zero.
  std::chrono::milliseconds watchdog_interval() const { return watchdog_interval_; }
  void ready(std::string_view status) const;
  void watchdog() const;
  void reloading() const;
  void stopping() const;

 private:
  bool enabled_ = false;
  std::chrono::milliseconds watchdog_interval_{0};
};

}  // namespace podscope
