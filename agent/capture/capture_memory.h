// The memory one capture may take (capture_memory_limit_mb), shared out among its sources as its window is planned
// and opened: each source that will hold data reserves a share of what is still unreserved, in the components'
// order, and keeps what it holds within that share, refusing aloud (a warning in the capture naming the bound, and a
// counter) what would not fit. Whatever its source, a byte a capture holds is charged to it.
#pragma once

#include <cstddef>
#include <mutex>

namespace podscope::agent {

class CaptureMemory {
 public:
  explicit CaptureMemory(size_t limit_bytes) : limit_(limit_bytes) {}
  CaptureMemory(const CaptureMemory&) = delete;
  CaptureMemory& operator=(const CaptureMemory&) = delete;

  size_t limit_bytes() const { return limit_; }
  size_t unreserved_bytes() const {
    std::lock_guard lock(mu_);
    return limit_ - reserved_;
  }
  // Reserves up to `bytes` of what is still unreserved; returns what was reserved.
  size_t reserve(size_t bytes) {
    std::lock_guard lock(mu_);
    const size_t granted = bytes < limit_ - reserved_ ? bytes : limit_ - reserved_;
    reserved_ += granted;
    return granted;
  }

 private:
  mutable std::mutex mu_;
  const size_t limit_;
  size_t reserved_ = 0;
};

}  // namespace podscope::agent
