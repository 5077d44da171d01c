// Hosts that take a connection and never answer: one listener on every loopback address (127.1.x.y) that never
// accepts, as a host whose agent hangs, or a network that drops what it is sent past the handshake.
#pragma once

#include <string>
#include <vector>

#include "tests/never_accepting_listener.h"

namespace podscope::testing {

class SilentHosts {
 public:
  // `count` addresses 127.1.x.y:port, all of them this listener.
  std::vector<std::string> hosts(int count) const {
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) {
      out.push_back("127.1." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) + ":" +
                    std::to_string(listener_.port()));
    }
    return out;
  }
  int port() const { return listener_.port(); }

 private:
  NeverAcceptingListener listener_{"0.0.0.0", 4096};
};

}  // namespace podscope::testing
