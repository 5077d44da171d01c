// `podscope forget`: an operator frees a worker name on a coordinator. A registered name belongs to the identity
// that first registered it (its certificate, or its address without TLS); after a host is replaced or renamed, this
// lets another agent register it. The coordinator allows it to that certificate or to its registry_admins.
#pragma once

#include <string>

#include "tls/tls_config.h"

namespace CLI {
class App;
}

namespace podscope::cli {

struct ForgetFlags {
  std::string coordinator;
  std::string host_name;
  tls::TlsConfig tls;  // --tls_cert, --tls_key, --tls_ca
};

void add_forget_flags(CLI::App& command, ForgetFlags& flags);
// 0 the name is free, 1 the coordinator refused or is unreachable (its reason printed), 2 usage.
int run_forget_command(const ForgetFlags& flags);

}  // namespace podscope::cli
