#include "daemon/signals.h"

#include <pthread.h>

#include <cerrno>

namespace podscope {

ShutdownSignals::ShutdownSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

int ShutdownSignals::wait() const {
  int signal = 0;
  while (sigwait(&set_, &signal) != 0) {}
  return signal;
}

int ShutdownSignals::wait_for(std::chrono::milliseconds timeout) const {
  const timespec limit{.tv_sec = static_cast<time_t>(timeout.count() / 1000),
                       .tv_nsec = static_cast<long>(timeout.count() % 1000 * 1'000'000)};
  for (;;) {
    const int signal = sigtimedwait(&set_, nullptr, &limit);
    if (signal > 0) return signal;
    if (errno == EAGAIN) return 0;  // EINTR: another signal interrupted the wait; wait again
  }
}

}  // namespace podscope
