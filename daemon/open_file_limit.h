// Every client connection, capture file and gRPC stream takes a descriptor; a daemon that runs out fails in ways
// that outlast the shortage (gRPC's listener stops re-arming after EMFILE). Daemons start with the most they may have.
#pragma once

#include <cstdint>

namespace podscope {

// Raises the soft RLIMIT_NOFILE to the hard one; returns the soft limit now in force.
uint64_t raise_open_file_limit();

}  // namespace podscope
