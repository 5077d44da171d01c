// Claiming a Unix socket path at start: a socket file left by a killed predecessor (nobody accepts on it)
// is removed; a live one (another daemon serving it) is an error naming the path; a non-socket is left alone.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace podscope {

absl::Status remove_stale_socket(const std::string& path);

}  // namespace podscope
