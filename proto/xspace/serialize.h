// A message's bytes, the same for the same message in every process: its maps written in key order (protobuf
// otherwise writes a map in the order of its hash table, which is seeded per process). The one way podscope writes a
// message whose bytes are kept or compared: the run directory's XSpaces, the analysis' outputs and a host's analysis.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace podscope::xspace {

// ResourceExhausted for a message over protobuf's 2 GiB.
absl::StatusOr<std::string> serialize_deterministically(const google::protobuf::Message& message);

}  // namespace podscope::xspace
