// Ring all-reduce over TCP between the ranks of ring_trainer: each rank sends to the next and receives
// from the previous one; reduce-scatter then all-gather, 2(N−1) chunk transfers per rank, each send and
// recv-done annotated with its XLA-style channel id (one per source rank and transfer index, the same in
// every step: channel = 1 + transfer_index × N + source_rank).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "examples/ring_trainer/buffers.h"

namespace ring_trainer {

struct Endpoint {
  std::string host;
  int port = 0;
};

class RingAllReduce {
 public:
  // Listens on peers[rank], connects to peers[(rank+1) % N] (retrying until connect_timeout_ms), accepts
  // the previous rank. Throws std::runtime_error naming the peer when the ring cannot be formed.
  RingAllReduce(int rank, const std::vector<Endpoint>& peers, int connect_timeout_ms);
  ~RingAllReduce();
  RingAllReduce(const RingAllReduce&) = delete;
  RingAllReduce& operator=(const RingAllReduce&) = delete;

  // Sums `data` across all ranks in place. `step` is the all-reduce id. Throws on a lost peer.
  void run(ModelBuffer& data, int64_t step);

  static uint32_t channel_id(int transfer_index, int src_rank, int world) {
    return static_cast<uint32_t>(1 + transfer_index * world + src_rank);
  }

 private:
  void send_loop();
  void send_all(const char* p, size_t n);
  void recv_all(char* p, size_t n);

  int rank_, world_;
  int next_fd_ = -1, prev_fd_ = -1;
  uint32_t replica_group_name_ = 0;
  // The sender thread sends one chunk while the caller receives one (a ring needs both at once).
  std::thread sender_;
  std::mutex mu_;
  std::condition_variable cv_;
  const char* send_ptr_ = nullptr;
  size_t send_bytes_ = 0;
  uint32_t send_channel_ = 0;
  bool send_pending_ = false, send_done_ = false, stop_ = false;
  std::string send_error_;
};

}  // namespace ring_trainer
