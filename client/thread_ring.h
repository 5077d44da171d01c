// The per-thread event buffer: a single-producer (the annotating thread) single-consumer (the background
// link thread) ring of fixed 32-byte records. The producer never allocates, locks or waits: when the
// ring is full the event is dropped and counted.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace podscope::client {

struct RawEvent {
  uint64_t begin_tick;
  uint64_t end_tick;
  int64_t value;
  uint32_t id;
  uint16_t arg;
  uint8_t kind;  // detail::Kind, or kContinuation
  uint8_t core_index;
};
static_assert(sizeof(RawEvent) == 32, "one buffered event is 32 bytes");
// A second record carrying more arguments of the record before it (compute bytes; a step's tallies).
inline constexpr uint8_t kContinuation = 0xff;

class ThreadRing {
 public:
  ThreadRing(size_t capacity_pow2, int64_t thread_id)
      : mask_(capacity_pow2 - 1), slots_(new RawEvent[capacity_pow2]()), thread_id_(thread_id) {}
  // Slots are zeroed here, so their pages are faulted in once, at creation, not on the hot path.

  // Producer side. Writes `n` (1 or 2) records as one unit, or drops them all.
  bool push(const RawEvent* events, size_t n) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head + n - cached_tail_ > mask_ + 1) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head + n - cached_tail_ > mask_ + 1) {
        dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return false;
      }
    }
    for (size_t i = 0; i < n; ++i) slots_[(head + i) & mask_] = events[i];
    head_.store(head + n, std::memory_order_release);
    return true;
  }

  // Consumer side: calls f(const RawEvent&) for each published record, then frees their slots.
  template <typename F>
  void drain(F&& f) {
    const uint64_t head = head_.load(std::memory_order_acquire);
    uint64_t tail = tail_.load(std::memory_order_relaxed);
    for (; tail != head; ++tail) f(slots_[tail & mask_]);
    tail_.store(tail, std::memory_order_release);
  }

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  int64_t thread_id() const { return thread_id_; }
  bool empty() const { return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_relaxed); }
  std::atomic<bool> retired{false};         // its thread has exited; freed once drained
  std::atomic<uint64_t> open_step_tick{0};  // begin tick of the step its thread is in; 0 between steps

 private:
  const uint64_t mask_;
  std::unique_ptr<RawEvent[]> slots_;
  const int64_t thread_id_;
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t cached_tail_ = 0;  // producer's last view of tail_
  std::atomic<uint64_t> dropped_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace podscope::client
