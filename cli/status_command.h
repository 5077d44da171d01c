// `podscope status`: each agent's collectors (available or why not), local clients, clock offset and RTT —
// asked of the agents directly (--service_addr) or of a coordinator's registry (--coordinator).
#pragma once

#include <string>

#include "tls/tls_config.h"

namespace CLI {
class App;
}

namespace podscope::cli {

struct StatusFlags {
  std::string service_addr;
  std::string coordinator;
  tls::TlsConfig tls;  // --tls_cert, --tls_key, --tls_ca
};

void add_status_flags(CLI::App& command, StatusFlags& flags);
int run_status_command(const StatusFlags& flags);

}  // namespace podscope::cli
