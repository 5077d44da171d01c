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

}  // namespace podscope::testing
