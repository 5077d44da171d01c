#include "cupti/buffer_pool.h"

#include <new>

namespace podscope::cupti {

uint8_t* BufferPool::take() {
  std::lock_guard lock(mu_);
  if (!free_.empty()) {
    uint8_t* buffer = free_.back();
    free_.pop_back();
    return buffer;
  }
  if (owned_.size() >= max_buffers_) return nullptr;
  owned_.emplace_back(static_cast<uint8_t*>(::operator new[](buffer_bytes_, std::align_val_t{8})));
  return owned_.back().get();
}

void BufferPool::give_back(uint8_t* buffer) {
  if (buffer == nullptr) return;
  std::lock_guard lock(mu_);
  free_.push_back(buffer);
}

size_t BufferPool::allocated() const {
  std::lock_guard lock(mu_);
  return owned_.size();
}

}  // namespace podscope::cupti
