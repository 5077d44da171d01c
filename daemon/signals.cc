#include "daemon/signals.h"

#include <pthread.h>

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

}  // namespace podscope
