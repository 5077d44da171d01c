#include "daemon/local_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>

namespace podscope {

std::string local_address(const std::string& listen, int port) {
  const size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? std::string() : listen.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "*") {
    host = "127.0.0.1";
  } else if (host == "[::]" || host == "::") {
    host = "[::1]";
  }
  return host + ":" + std::to_string(port);
}

bool is_this_host(const std::string& numeric_address) {
  in_addr v4{};
  in6_addr v6{};
  const bool is_v4 = inet_pton(AF_INET, numeric_address.c_str(), &v4) == 1;
  const bool is_v6 = !is_v4 && inet_pton(AF_INET6, numeric_address.c_str(), &v6) == 1;
  if (!is_v4 && !is_v6) return false;
  if (is_v4 && (ntohl(v4.s_addr) >> 24) == 127) return true;
  if (is_v6 && IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return false;
  bool found = false;
  for (const ifaddrs* i = interfaces; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (is_v4 && i->ifa_addr->sa_family == AF_INET) {
      found = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == v4.s_addr;
    } else if (is_v6 && i->ifa_addr->sa_family == AF_INET6) {
      found = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, &v6, sizeof(v6)) == 0;
    }
  }
  freeifaddrs(interfaces);
  return found;
}

}  // namespace podscope
