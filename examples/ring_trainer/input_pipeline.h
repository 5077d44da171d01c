// The trainer's input pipeline: a producer thread fills batches (random floats) into a bounded queue;
// --input_delay_ms slows the producer so training steps wait on input (infeed).
// Like tf.data's prefetch, the producer starts a batch only once the queue has room for it, so its pace
// follows consumption. A producer that worked ahead regardless (delay first, then wait for room) runs free
// at its own period: across data-parallel ranks the phases then stay wherever the start left them, and only
// the rank whose input happens to come last waits in infeed while the others wait for it in the all-reduce.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

namespace ring_trainer {

class InputPipeline {
 public:
  InputPipeline(size_t batch_floats, int delay_ms, size_t capacity, uint32_t seed)
      : batch_floats_(batch_floats), delay_ms_(delay_ms), capacity_(capacity), rng_(seed) {
    producer_ = std::thread([this] { produce(); });
  }
  ~InputPipeline() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    producer_.join();
  }
  // Blocks until a batch is ready.
  std::vector<float> next() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty(); });
    std::vector<float> batch = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return batch;
  }

 private:
  void produce() {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || queue_.size() < capacity_; });
        if (stop_) return;
      }
      if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      std::vector<float> batch(batch_floats_);
      for (float& v : batch) v = dist(rng_);
      std::lock_guard lock(mu_);
      if (stop_) return;
      queue_.push_back(std::move(batch));
      cv_.notify_all();
    }
  }

  size_t batch_floats_;
  int delay_ms_;
  size_t capacity_;
  std::mt19937 rng_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<float>> queue_;
  bool stop_ = false;
  std::thread producer_;
};

}  // namespace ring_trainer
