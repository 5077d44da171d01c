// A bounded pool of activity buffers for CUPTI's buffer-request callback: at most `max_buffers` of
// `buffer_bytes` each are ever allocated, and they are reused across capture windows. When every buffer
// is in flight, take() returns nullptr and CUPTI drops records (counted by CUPTI, reported as a warning)
// rather than the traced program's memory growing without bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace podscope::cupti {

class BufferPool {
 public:
  BufferPool(size_t buffer_bytes, size_t max_buffers) : buffer_bytes_(buffer_bytes), max_buffers_(max_buffers) {}

  // A free buffer (8-byte aligned, as CUPTI requires), or nullptr when all are in flight.
  uint8_t* take();
  // Returns a buffer taken from this pool.
  void give_back(uint8_t* buffer);

  size_t buffer_bytes() const { return buffer_bytes_; }
  size_t allocated() const;

 private:
  struct Free {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t{8}); }
  };
  const size_t buffer_bytes_;
  const size_t max_buffers_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<uint8_t[], Free>> owned_;
  std::vector<uint8_t*> free_;
};

}  // namespace podscope::cupti
