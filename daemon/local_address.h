// Where a client on this host reaches one of the daemon's own servers: the self-check of the gRPC port.
#pragma once

#include <string>

namespace podscope {

// "host:port" for a server that listens on `listen` ("host:port") and bound `port`: the loopback address for a
// wildcard host, else the host itself. ("0.0.0.0:0", 41234) → "127.0.0.1:41234", ("[::]:8466", 8466) →
// "[::1]:8466", ("10.0.0.5:0", 9466) → "10.0.0.5:9466".
std::string local_address(const std::string& listen, int port);

// Whether a numeric address ("127.0.0.1", "::1", "10.0.0.5") is this host's: loopback, or an address of one of its
// network interfaces.
bool is_this_host(const std::string& numeric_address);

}  // namespace podscope
