// Proto `string` fields must hold valid UTF-8: one invalid byte from a client makes the whole XSpace unparseable
// for strict readers (Python's protobuf). Every string the XSpace builder stores goes through this.
#pragma once

#include <string>
#include <string_view>

namespace podscope::xspace {

// `text` with every byte that does not start or continue a well-formed UTF-8 sequence (overlong forms, surrogates
// and code points past U+10FFFF included) replaced by U+FFFD. Valid text comes back unchanged.
std::string valid_utf8(std::string_view text);

}  // namespace podscope::xspace
