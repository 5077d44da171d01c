// The gate of the calls that capture or steer a capture (Profile, Terminate, Monitor, NewSession, the
// continuous-profiling and recorded-window calls, the coordinator's Capture): allowed_clients decides, a refusal is
// PERMISSION_DENIED naming the caller and is counted in podscope_grpc_calls_refused_total{method}, and every
// allowed call leaves one audit line naming the caller and its address. Status and clock-sync calls do not pass it:
// TLS (with tls_client_ca) already limits them to callers with a certificate.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/server_context.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "tls/tls_config.h"

namespace podscope::tls {

class CallAuthorizer {
 public:
  CallAuthorizer(const TlsConfig& config, prometheus::Registry& registry, const prometheus::Labels& labels);

  // kQuiet leaves no audit line for an allowed call: for the calls every agent repeats (heartbeats).
  enum class Audit { kLine, kQuiet };
  // A call that names, in kOnBehalfOfMetadata, the caller an agent fans out for is allowed when both that agent
  // and the named caller are; its audit line names both ("cli.example via agent.example").
  grpc::Status authorize(const grpc::ServerContextBase& context, std::string_view method, Audit audit = Audit::kLine);

  // Who the caller is, as something it registers owns: its certificate's identity with TLS, else its network
  // address without the port ("address 10.0.0.5").
  std::string owner_of(const grpc::ServerContextBase& context) const;

 private:
  bool tls_on_;
  std::vector<std::string> allowed_clients_;
  prometheus::Family<prometheus::Counter>& refused_;
};

}  // namespace podscope::tls
