// Termination and reload signals delivered synchronously: block SIGTERM, SIGINT and SIGHUP before any thread
// starts (threads inherit the mask), then the main thread waits for them and acts outside signal context.
#pragma once

#include <chrono>
#include <csignal>

namespace podscope {

class ShutdownSignals {
 public:
  ShutdownSignals();  // blocks the signals in the calling thread; construct before starting threads
  // Waits for the next signal and returns it (SIGTERM, SIGINT or SIGHUP).
  int wait() const;
  // The same for at most `timeout`: 0 when none came.
  int wait_for(std::chrono::milliseconds timeout) const;

 private:
  sigset_t set_;
};

}  // namespace podscope
