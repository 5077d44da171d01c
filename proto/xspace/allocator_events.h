// TensorFlow's allocator events from a replay of one allocator's allocations and frees: MemoryAllocation and
// MemoryDeallocation with the stats TF's allocators write (xplane_schema), so that the memory profile reads them
// as TensorFlow's. The replay keeps the blocks it saw allocated (by address), their live bytes (bytes_allocated)
// and the running maximum (peak_bytes_in_use). A free of a block it did not see allocated (one allocated before
// the capture) is counted and subtracts nothing, so the total never goes negative.
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::xspace {

class AllocatorEvents {
 public:
  // `name` is the allocator_name every event carries; events go to lines of `plane`.
  AllocatorEvents(std::string name, XPlaneBuilder& plane);

  // Both return the event's stats builder, for stats of the caller's own (tf_op, correlation_id).
  XStatsBuilder allocate(XLineBuilder& line, int64_t time_ns, uint64_t address, int64_t bytes);
  XStatsBuilder free(XLineBuilder& line, int64_t time_ns, uint64_t address);

  // Frees of blocks it did not see allocated.
  uint64_t unknown_frees() const { return unknown_frees_; }

 private:
  XStatsBuilder add_event(XLineBuilder& line, int64_t metadata_id, int64_t time_ns, uint64_t address,
                          int64_t block_bytes);

  std::string name_;
  int64_t allocation_id_, deallocation_id_;
  absl::flat_hash_map<uint64_t, int64_t> blocks_;  // address → bytes
  int64_t live_bytes_ = 0;
  int64_t peak_bytes_ = 0;
  uint64_t unknown_frees_ = 0;
};

}  // namespace podscope::xspace
