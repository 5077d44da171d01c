// Waits for a condition another thread or process brings about, polling it every 10 ms: `wait_for` for at most the
// time given, `eventually` for at most 20 s (a loaded 2-core box may be slow to run that thread). Both say whether it
// held.
#pragma once

#include <chrono>
#include <thread>

namespace podscope::testing {

template <typename Done>
bool wait_for(Done done, std::chrono::milliseconds timeout) {
  for (auto deadline = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
    if (done()) return true;
  }
  return done();
}

template <typename Done>
bool eventually(Done done) {
  return wait_for(done, std::chrono::seconds(20));
}

}  // namespace podscope::testing
