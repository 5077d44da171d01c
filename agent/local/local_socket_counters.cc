#include "agent/local/local_socket_counters.h"

#include "daemon/host_metrics.h"

namespace podscope::agent {

std::string_view refusal_name(LocalRefusal reason) {
  switch (reason) {
    case LocalRefusal::kTotalCap: return "total_cap";
    case LocalRefusal::kUidCap: return "uid_cap";
    case LocalRefusal::kUntrusted: return "untrusted";
    case LocalRefusal::kIdleTimeout: return "idle_timeout";
    case LocalRefusal::kMalformed: return "malformed";
  }
  return "unknown";
}

LocalSocketCounters::LocalSocketCounters(prometheus::Registry& registry, const std::string& host_name)
    : connections_(host_gauge(registry, host_name, "podscope_local_connections",
                              "Connections open on the local socket, registered or not")),
      registered_(host_gauge(registry, host_name, "podscope_local_registered_clients",
                             "Annotated processes registered on the local socket")) {
  auto& refused =
      host_family<prometheus::Counter>(registry, host_name, "podscope_local_connections_refused_total",
                                       "Local socket connections refused at accept or closed by the agent, by reason");
  // Every reason from the start, at 0: a rate over a reason that has not happened yet is 0, not absent.
  for (LocalRefusal reason : kLocalRefusals) {
    refused_[static_cast<size_t>(reason)] = &refused.Add({{"reason", std::string(refusal_name(reason))}});
  }
}

LocalSocketCounts LocalSocketCounters::counts() const {
  LocalSocketCounts out;
  out.connections = static_cast<uint64_t>(connections_.Value());
  out.registered = static_cast<uint64_t>(registered_.Value());
  for (size_t i = 0; i < refused_.size(); ++i) out.refused[i] = static_cast<uint64_t>(refused_[i]->Value());
  return out;
}

}  // namespace podscope::agent
