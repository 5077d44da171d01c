// Proto `string` fields must hold valid UTF-8: one invalid byte from a client makes the whole XSpace unparseable
// for strict readers (Python's protobuf). Every string the XSpace builder stores goes through this, and every
// serialized message that arrives from elsewhere (framework profiler servers, client tracers) is parsed with
// parse_replacing_invalid_utf8.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace podscope::xspace {

// `text` with every byte that does not start or continue a well-formed UTF-8 sequence (overlong forms, surrogates
// and code points past U+10FFFF included) replaced by U+FFFD. Valid text comes back unchanged.
std::string valid_utf8(std::string_view text);
// Whether `text` is well-formed UTF-8 (valid_utf8 would return it unchanged), without copying it.
bool is_valid_utf8(std::string_view text);

// Parses `bytes` into `message` as ParseFromString does, except that a `string` field holding invalid UTF-8 (which
// C++ protobuf refuses in proto3, losing the whole message) is kept as valid_utf8 makes it. Returns how many strings
// were repaired (0 when the bytes parsed as they were, at no extra cost), or an error naming the message type, its
// size and what broke when the bytes are not that message.
absl::StatusOr<int> parse_replacing_invalid_utf8(std::string_view bytes, google::protobuf::Message& message);

}  // namespace podscope::xspace
