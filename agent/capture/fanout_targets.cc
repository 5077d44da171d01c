#include "agent/capture/fanout_targets.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

#include "absl/strings/str_join.h"

namespace podscope::agent {
namespace {

// Glob match where '*' matches any run of characters (none included) except `barrier`, every other character itself.
bool matches(std::string_view pattern, std::string_view text, char barrier = '\0') {
  size_t p = 0, t = 0;
  size_t star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos && text[resume] != barrier) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// inet_pton reads a C string: text after a NUL byte would pass unseen.
bool is_ipv4(const std::string& host) {
  in_addr out{};
  return host.find('\0') == std::string::npos && inet_pton(AF_INET, host.c_str(), &out) == 1;
}

bool is_ipv6(const std::string& host) {
  in6_addr out{};
  return host.find('\0') == std::string::npos && inet_pton(AF_INET6, host.c_str(), &out) == 1;
}

// Letters, digits, '-' and '_' in dot-separated non-empty labels, at most 253 characters.
bool is_dns_name(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  size_t label = 0;
  for (char c : name) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      if (++label > 63) return false;
    } else {
      return false;
    }
  }
  return label > 0;
}

// Splits a pattern or address into host (IPv6 brackets removed) and port at the last ':' outside brackets.
struct Split {
  std::string_view host;
  std::string_view port;
  bool bracketed = false;
};
std::optional<Split> split_host_port(std::string_view text) {
  Split out;
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') return std::nullopt;
    out.host = text.substr(1, close - 1);
    out.port = text.substr(close + 2);
    out.bracketed = true;
    return out;
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  out.host = text.substr(0, colon);
  out.port = text.substr(colon + 1);
  return out;
}

bool is_address_pattern(const Split& pattern) {
  const std::string_view allowed = pattern.bracketed ? "0123456789abcdefABCDEF:.*" : "0123456789.*";
  return std::all_of(pattern.host.begin(), pattern.host.end(),
                     [allowed](char c) { return allowed.find(c) != std::string_view::npos; });
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

absl::StatusOr<FanoutHost> parse_fanout_host(std::string_view text, int default_port) {
  const std::string original(text);
  const auto refuse = [&original]() {
    return absl::InvalidArgumentError("NewSession: host '" + original +
                                      "' is not a host:port address (a DNS name, an IPv4 address or a bracketed "
                                      "IPv6 address, and a port)");
  };
  constexpr std::string_view kScheme = "grpc://";
  if (text.starts_with(kScheme)) text.remove_prefix(kScheme.size());
  FanoutHost out;
  std::optional<Split> split = split_host_port(text);
  std::string_view port_text;
  if (!split) {
    if (text.find_first_of("[]:") != std::string_view::npos) return refuse();
    out.host = std::string(text);
    out.port = default_port;
  } else {
    if (!split->bracketed && split->host.find_first_of("[]:") != std::string_view::npos) return refuse();
    out.host = std::string(split->host);
    port_text = split->port;
    if (port_text.empty() || port_text.size() > 5 ||
        port_text.find_first_not_of("0123456789") != std::string_view::npos) {
      return refuse();
    }
    std::from_chars(port_text.data(), port_text.data() + port_text.size(), out.port);
  }
  if (out.port < 1 || out.port > 65535) return refuse();
  const bool host_ok = split && split->bracketed ? is_ipv6(out.host) : (is_ipv4(out.host) || is_dns_name(out.host));
  if (!host_ok) return refuse();
  out.address = (is_ipv6(out.host) ? "[" + out.host + "]" : out.host) + ":" + std::to_string(out.port);
  return out;
}

absl::Status check_fanout_patterns(const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    const std::optional<Split> split = split_host_port(pattern);
    if (!split || split->host.empty() || split->port.empty()) {
      return absl::InvalidArgumentError("'" + pattern + "' is not a host:port pattern (use * for any host or port)");
    }
  }
  return absl::OkStatus();
}

FanoutTargets::FanoutTargets(std::vector<std::string> patterns, int own_grpc_port) : patterns_(std::move(patterns)) {
  if (patterns_.empty()) patterns_.push_back("*:" + std::to_string(own_grpc_port));
}

std::vector<std::string> FanoutTargets::allowed_addresses(const FanoutHost& host,
                                                          const std::vector<std::string>& resolved) const {
  const std::string port = std::to_string(host.port);
  const bool named = !is_ipv4(host.host) && !is_ipv6(host.host);
  std::vector<std::string> out;
  for (const std::string& address : resolved) {
    for (const std::string& text : patterns_) {
      const std::optional<Split> pattern = split_host_port(text);
      if (!pattern || !matches(pattern->port, port)) continue;
      const bool allowed = is_address_pattern(*pattern) ? matches(pattern->host, address)
                                                        : named && matches(lower(pattern->host), lower(host.host), '.');
      if (allowed) {
        out.push_back(address);
        break;
      }
    }
  }
  return out;
}

std::string FanoutTargets::describe() const { return absl::StrJoin(patterns_, ", "); }

}  // namespace podscope::agent
