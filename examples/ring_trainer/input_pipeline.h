// The trainer's input pipeline: a producer thread makes batches (random floats); --input_delay_ms slows it so
// training steps wait on input (infeed). Each batch is one root input stage ("input_batch") holding a read
// ("read_batch"), a preprocess ("normalize_batch") and an enqueue ("enqueue_batch") stage; --slow_read_ms and
// --slow_preprocess_ms make the read or the preprocess stage wait that long, so the slow stage is known.
// By default the producer starts a batch when a step asks for one, not ahead of time. A producer that works
// ahead (a prefetch queue) runs free at its own period once it is the bottleneck: across data-parallel ranks
// the phases then stay wherever the start left them, and only the rank whose input happens to come last waits
// in infeed while the others wait for it in the all-reduce. On demand, every rank asks right after the same
// all-reduce, so every rank waits on its own input each step. With `prefetch_batches` the producer keeps that
// many batches ready ahead, as a real loader's prefetch does, so that a step whose input is fast never waits.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "client/podscope.h"
#include "examples/ring_trainer/buffers.h"

namespace ring_trainer {

struct InputDelays {
  int batch_ms = 0;       // before the batch's stages begin
  int read_ms = 0;        // inside its read stage
  int preprocess_ms = 0;  // inside its preprocess stage
};

class InputPipeline {
 public:
  InputPipeline(size_t batch_floats, InputDelays delays, uint32_t seed, int prefetch_batches)
      : batch_floats_(batch_floats), delays_(delays), rng_(seed), requested_(static_cast<size_t>(prefetch_batches)) {
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
  // Takes the next batch, blocking only while none is ready: a ready batch is replaced when the step calls
  // refill(), after its wait for input. Woken inside that wait, the producer would take the core the step runs
  // on (the scheduler favours a thread just woken) and the step would wait for a batch it already had.
  StepBuffer next() {
    std::unique_lock lock(mu_);
    if (queue_.empty()) {
      ++requested_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !queue_.empty(); });
    } else {
      ++to_refill_;
    }
    StepBuffer batch = std::move(queue_.front());
    queue_.pop_front();
    return batch;
  }
  // Asks the producer for the batches taken from the ready queue since the last call.
  void refill() {
    {
      std::lock_guard lock(mu_);
      if (to_refill_ == 0) return;
      requested_ += std::exchange(to_refill_, 0);
    }
    cv_.notify_all();
  }

 private:
  void produce() {
    using podscope::InputStageCategory;
    const podscope::NameId batch_name = podscope::intern("input_batch"), read_name = podscope::intern("read_batch"),
                           preprocess_name = podscope::intern("normalize_batch"),
                           enqueue_name = podscope::intern("enqueue_batch");
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || requested_ > 0; });
        if (stop_) return;
        --requested_;
      }
      wait_ms(delays_.batch_ms);
      auto batch_stage = podscope::input_stage(batch_name, InputStageCategory::kPreprocess);
      StepBuffer batch(batch_floats_);
      {
        auto read = podscope::input_stage(read_name, InputStageCategory::kRead, batch_stage.input_stage_id());
        wait_ms(delays_.read_ms);
        for (float& v : batch) v = dist(rng_);
      }
      {
        auto normalize =
            podscope::input_stage(preprocess_name, InputStageCategory::kPreprocess, batch_stage.input_stage_id());
        wait_ms(delays_.preprocess_ms);
        float max_abs = 1e-6f;
        for (float v : batch) max_abs = std::max(max_abs, std::abs(v));
        for (float& v : batch) v /= max_abs;
      }
      auto enqueue = podscope::input_stage(enqueue_name, InputStageCategory::kEnqueue, batch_stage.input_stage_id());
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(batch));
      // Ended before the step can take the batch, so that every stage lies inside the step's wait for it.
      enqueue.end();
      batch_stage.end();
      cv_.notify_all();
    }
  }

  static void wait_ms(int ms) {
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }

  size_t batch_floats_;
  InputDelays delays_;
  std::mt19937 rng_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StepBuffer> queue_;
  size_t requested_ = 0;  // batches asked for (or to be kept ahead) and not yet started
  size_t to_refill_ = 0;  // ready batches taken, not yet asked for again
  bool stop_ = false;
  std::thread producer_;
};

}  // namespace ring_trainer
