#include "proto/xspace/allocator_events.h"

#include <algorithm>
#include <utility>

#include "proto/xspace/names.h"

namespace podscope::xspace {

AllocatorEvents::AllocatorEvents(std::string name, XPlaneBuilder& plane)
    : name_(std::move(name)),
      allocation_id_(plane.event_metadata_id(kMemoryAllocationEventName)),
      deallocation_id_(plane.event_metadata_id(kMemoryDeallocationEventName)) {}

XStatsBuilder AllocatorEvents::allocate(XLineBuilder& line, int64_t time_ns, uint64_t address, int64_t bytes) {
  auto [it, inserted] = blocks_.try_emplace(address, bytes);
  if (!inserted) {  // the free of the block there before was not seen: the new block replaces it
    live_bytes_ -= it->second;
    it->second = bytes;
  }
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return add_event(line, allocation_id_, time_ns, address, bytes);
}

XStatsBuilder AllocatorEvents::free(XLineBuilder& line, int64_t time_ns, uint64_t address) {
  int64_t bytes = 0;
  if (auto it = blocks_.find(address); it != blocks_.end()) {
    bytes = it->second;
    live_bytes_ -= bytes;
    blocks_.erase(it);
  } else {
    ++unknown_frees_;
  }
  return add_event(line, deallocation_id_, time_ns, address, bytes);
}

XStatsBuilder AllocatorEvents::add_event(XLineBuilder& line, int64_t metadata_id, int64_t time_ns, uint64_t address,
                                         int64_t block_bytes) {
  auto stats = line.add_event(metadata_id, time_ns, 0);
  stats.add(kAllocatorNameStat, name_)
      .add(kBytesAllocatedStat, live_bytes_)
      .add(kBytesReservedStat, int64_t{0})
      .add(kPeakBytesInUseStat, peak_bytes_)
      .add(kRequestedBytesStat, block_bytes)
      .add(kAllocationBytesStat, block_bytes)
      .add(kAddressStat, static_cast<int64_t>(address));
  return stats;
}

}  // namespace podscope::xspace
