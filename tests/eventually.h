// Waits for a condition another thread brings about: polls `done` every 10 ms for at most 20 s (a loaded 2-core box
// may be slow to run that thread) and says whether it held.
#pragma once

#include <chrono>
#include <thread>

namespace podscope::testing {

template <typename Done>
bool eventually(Done done) {
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
    if (done()) return true;
  }
  return done();
}

}  // namespace podscope::testing
