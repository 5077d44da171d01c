// The trainer's input pipeline: a producer thread makes batches (random floats); --input_delay_ms slows it so
// training steps wait on input (infeed).
// The producer starts a batch when a step asks for one, not ahead of time. A producer that works ahead (a
// prefetch queue) runs free at its own period once it is the bottleneck: across data-parallel ranks the
// phases then stay wherever the start left them, and only the rank whose input happens to come last waits
// in infeed while the others wait for it in the all-reduce. On demand, every rank asks right after the same
// all-reduce, so every rank waits on its own input each step.
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
  InputPipeline(size_t batch_floats, int delay_ms, uint32_t seed)
      : batch_floats_(batch_floats), delay_ms_(delay_ms), rng_(seed) {
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
  // Asks for a batch and blocks until it is ready.
  std::vector<float> next() {
    std::unique_lock lock(mu_);
    ++requested_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !queue_.empty(); });
    std::vector<float> batch = std::move(queue_.front());
    queue_.pop_front();
    return batch;
  }

 private:
  void produce() {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || requested_ > 0; });
        if (stop_) return;
        --requested_;
      }
      if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      std::vector<float> batch(batch_floats_);
      for (float& v : batch) v = dist(rng_);
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(batch));
      cv_.notify_all();
    }
  }

  size_t batch_floats_;
  int delay_ms_;
  std::mt19937 rng_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<float>> queue_;
  size_t requested_ = 0;  // batches asked for and not yet started
  bool stop_ = false;
  std::thread producer_;
};

}  // namespace ring_trainer
