// What a serialized message will cost once parsed, bounded from its bytes before it is parsed. Protobuf's objects
// take several times the bytes they came as (an XEvent sent as 6 bytes is an object of about 80, each in an
// allocation of its own), so an answer that fits a budget as bytes may not fit it parsed: a few MiB of empty
// messages parse into hundreds. The bound walks the wire format with the message's descriptor and charges each
// message its object and allocation, each string its bytes and heap header, each repeated element its slot twice
// (repeated fields grow by doubling), each map entry its node and unknown fields what they hold.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"

namespace podscope::agent {

struct ParsedSize {
  size_t bytes = 0;           // at most this much heap once parsed
  bool invalid_utf8 = false;  // some string must be repaired first (xspace::parse_replacing_invalid_utf8)
  // What that repair holds besides the message's bytes at its peak: the repaired copy, and a copy of each enclosing
  // message on the way down to the deepest one.
  size_t repair_bytes = 0;
  // The most parsing takes besides the bytes parsed.
  size_t peak_bytes() const { return bytes + (invalid_utf8 ? repair_bytes : 0); }
};

// INVALID_ARGUMENT naming the type and the byte where the wire format breaks when `bytes` are not such a message.
absl::StatusOr<ParsedSize> parsed_size_bound(std::string_view bytes, const google::protobuf::Descriptor& type);

}  // namespace podscope::agent
