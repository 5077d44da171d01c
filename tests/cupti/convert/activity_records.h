// Synthetic CUPTI activity records for the converter's tests: a record of one kind with every other field zero,
// handed over as CUPTI's buffers hand records out.
#pragma once

#include <cupti_activity.h>

#include <cstring>

namespace podscope::testing {

template <typename Record>
Record zeroed(CUpti_ActivityKind kind) {
  Record r;
  std::memset(&r, 0, sizeof(r));
  r.kind = kind;
  return r;
}

// CUPTI hands records out as CUpti_Activity*; the record's kind says which struct it really is.
inline const CUpti_Activity& as_activity(const void* record) { return *static_cast<const CUpti_Activity*>(record); }

// The record of device 0 with an H100's occupancy limits.
inline CUpti_ActivityDevice5 h100_device() {
  auto device = zeroed<CUpti_ActivityDevice5>(CUPTI_ACTIVITY_KIND_DEVICE);
  device.numThreadsPerWarp = 32;
  device.maxWarpsPerMultiprocessor = 64;
  device.maxBlocksPerMultiprocessor = 32;
  device.maxRegistersPerMultiprocessor = 65536;
  device.maxSharedMemoryPerMultiprocessor = 228 * 1024;
  return device;
}

}  // namespace podscope::testing
