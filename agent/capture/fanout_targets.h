// Which addresses a NewSession served by this agent may capture. A NewSession names its hosts itself, so without
// this an agent would dial any address a client lists: a proxy into the agent's network. A host is parsed as
// `host:port` only (no gRPC target scheme such as `unix:`, `ipv4:` or `dns:`), resolved once, and the agent dials the
// address it resolved to, so what was checked is what is dialled.
//
// Patterns are `host:port` with `*` for any run of characters. A pattern whose host holds only digits, dots, `*` or
// a bracketed IPv6 form ("10.0.*:8466", "*:8466", "[fd00:*]:*") is an address pattern: it matches the addresses a
// host resolves to, never the host's name (so `10.0.attacker.example` is no `10.0.*`). Any other pattern is a name
// pattern ("worker-*.pod:*"): it matches the name as the request wrote it, as a whole name, its `*` within one label.
// None configured means any host on this agent's own gRPC port (a pod's agents all listen on the same one).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace podscope::agent {

// A NewSession host as parsed: `host` is a DNS name, an IPv4 address or an IPv6 address (without its brackets).
struct FanoutHost {
  std::string address;  // host:port as TensorBoard names the host ("[::1]:8466" for IPv6)
  std::string host;
  int port = 0;
};

// `text` as `host:port`, `[v6]:port` or a bare host (then `default_port`), with the optional "grpc://" prefix
// TensorFlow's tools accept; INVALID_ARGUMENT for anything else, naming it.
absl::StatusOr<FanoutHost> parse_fanout_host(std::string_view text, int default_port);

// OK when every pattern is `host:port` with neither part empty; otherwise names the first that is not.
absl::Status check_fanout_patterns(const std::vector<std::string>& patterns);

class FanoutTargets {
 public:
  // `patterns` as check_fanout_patterns accepts them; empty: "*:<own_grpc_port>".
  FanoutTargets(std::vector<std::string> patterns, int own_grpc_port);

  // Of the numeric addresses `host` resolved to, those a pattern allows, in the resolver's order (all of them when
  // a name pattern allows the host by name); empty when no pattern allows it.
  std::vector<std::string> allowed_addresses(const FanoutHost& host, const std::vector<std::string>& resolved) const;
  // The patterns in force, for refusals: "*:8466" or "10.0.*:8466, worker-*:*".
  std::string describe() const;

 private:
  std::vector<std::string> patterns_;
};

}  // namespace podscope::agent
