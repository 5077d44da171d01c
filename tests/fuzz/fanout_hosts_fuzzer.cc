// The worker list of a NewSession as the agent reads it: allowed_fanout_targets patterns, then hosts, each parsed
// as host:port (parse_fanout_host) and matched against the patterns (FanoutTargets), never a crash or a hang. And
// what it accepts is what the agent may dial: a parsed host re-parses from its address to the same host and port,
// has a port in 1..65535 and no character of a gRPC target scheme or a path outside an IPv6 address's brackets, and
// an allowed address is one of those the host resolved to.
// Input: the first line is the patterns, comma-separated; every later line is a worker list, comma-separated.
// Seeds: tests/data/fanout_hosts (worker lists with the attacks the agent refuses).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/capture/fanout_targets.h"

namespace {

using podscope::agent::FanoutHost;

[[noreturn]] void fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "fan-out host property broken: %s for '%.*s'\n", what, static_cast<int>(input.size()),
               input.data());
  std::abort();
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> out;
  while (true) {
    const size_t at = text.find(separator);
    out.emplace_back(text.substr(0, at));
    if (at == std::string_view::npos) return out;
    text.remove_prefix(at + 1);
  }
}

// What the resolver could answer for `host`: itself when it is an address, else a fixed documentation address.
std::vector<std::string> resolved_for(const FanoutHost& host) {
  const bool numeric = host.host.find_first_not_of("0123456789.:abcdefABCDEF") == std::string::npos &&
                       host.host.find_first_of(".:") != std::string::npos;
  return {numeric ? host.host : "192.0.2.7"};
}

void check_host(const podscope::agent::FanoutTargets* targets, const std::string& text) {
  const absl::StatusOr<FanoutHost> host = podscope::agent::parse_fanout_host(text, 8466);
  if (!host.ok()) return;
  if (host->port < 1 || host->port > 65535) fail("port out of range", text);
  const std::string_view address = host->address;
  const size_t close = address.find(']');
  const std::string_view outside = close == std::string_view::npos ? address : address.substr(close + 1);
  if (outside.find_first_of("/@ \\") != std::string_view::npos) fail("path or user info accepted", text);
  if (close == std::string_view::npos && address.find(':') != address.rfind(':')) fail("scheme form accepted", text);
  const absl::StatusOr<FanoutHost> again = podscope::agent::parse_fanout_host(host->address, 1);
  if (!again.ok() || again->host != host->host || again->port != host->port) fail("address does not re-parse", text);
  if (targets == nullptr) return;
  const std::vector<std::string> resolved = resolved_for(*host);
  for (const std::string& allowed : targets->allowed_addresses(*host, resolved)) {
    if (allowed != resolved.front()) fail("allowed an address it did not resolve to", text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::vector<std::string> patterns = split(input.substr(0, newline), ',');
  std::optional<podscope::agent::FanoutTargets> targets;
  if (podscope::agent::check_fanout_patterns(patterns).ok()) targets.emplace(patterns, 8466);
  if (targets) (void)targets->describe();
  if (newline == std::string_view::npos) return 0;
  for (const std::string& line : split(input.substr(newline + 1), '\n')) {
    for (const std::string& host : split(line, ',')) check_host(targets ? &*targets : nullptr, host);
  }
  return 0;
}
