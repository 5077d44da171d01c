// ring_trainer's buffers, reported through libpodscope's allocation hook so that captures show them in the memory
// profile: a std::allocator that reports each block it hands out and takes back under its pool's allocator name
// ("ring_trainer_model": weights, product, gradients; "ring_trainer_step": what each step allocates and frees, the
// input batch and the ring's receive chunk), and counts the pool's live bytes and their peak, which the trainer
// prints when it exits so that a test can compare them with the profile.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "client/podscope.h"

namespace ring_trainer {

enum class Pool { kModel, kStep };

struct PoolStats {
  const char* name;
  std::atomic<int64_t> live_bytes{0};
  std::atomic<int64_t> peak_bytes{0};
};

inline PoolStats& pool_stats(Pool pool) {
  static PoolStats model{"ring_trainer_model"}, step{"ring_trainer_step"};
  return pool == Pool::kModel ? model : step;
}

template <typename T, Pool kPool>
struct ReportedAllocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = ReportedAllocator<U, kPool>;
  };
  ReportedAllocator() = default;
  template <typename U>
  ReportedAllocator(const ReportedAllocator<U, kPool>&) {}

  T* allocate(size_t n) {
    T* p = std::allocator<T>().allocate(n);
    const auto bytes = static_cast<int64_t>(n * sizeof(T));
    PoolStats& stats = pool_stats(kPool);
    const int64_t live = stats.live_bytes.fetch_add(bytes) + bytes;
    int64_t peak = stats.peak_bytes.load();
    while (live > peak && !stats.peak_bytes.compare_exchange_weak(peak, live)) {}
    podscope::alloc(bytes, reinterpret_cast<uint64_t>(p), allocator_name());
    return p;
  }
  void deallocate(T* p, size_t n) {
    podscope::free(reinterpret_cast<uint64_t>(p), allocator_name());
    pool_stats(kPool).live_bytes.fetch_sub(static_cast<int64_t>(n * sizeof(T)));
    std::allocator<T>().deallocate(p, n);
  }
  template <typename U>
  bool operator==(const ReportedAllocator<U, kPool>&) const {
    return true;
  }

 private:
  static podscope::NameId allocator_name() {
    static const podscope::NameId name = podscope::intern(pool_stats(kPool).name);
    return name;
  }
};

using ModelBuffer = std::vector<float, ReportedAllocator<float, Pool::kModel>>;
using StepBuffer = std::vector<float, ReportedAllocator<float, Pool::kStep>>;

}  // namespace ring_trainer
