// A one-request HTTP/1.0 client for the daemons' metrics servers (/metrics, /healthz) on 127.0.0.1, and the TCP
// connection under it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace podscope::testing {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// A TCP connection to 127.0.0.1:port (its descriptor), or -1 when it cannot be made.
inline int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` as it is to 127.0.0.1:port and returns everything the server answers until it closes; throws when
// the connection fails.
inline std::string http_request(int port, const std::string& request) {
  const int fd = connect_loopback(port);
  if (fd < 0) throw std::runtime_error("connect to HTTP port " + std::to_string(port) + " failed");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    throw std::runtime_error("write failed");
  }
  std::string response;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
  close(fd);
  return response;
}

// GET http://127.0.0.1:port/path; throws when the connection fails or the answer is not HTTP.
inline HttpResponse http_fetch(int port, const std::string& path) {
  const std::string response = http_request(port, "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  const size_t body = response.find("\r\n\r\n");
  const size_t space = response.find(' ');
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos || space == std::string::npos) {
    throw std::runtime_error("bad HTTP: " + response);
  }
  return {std::atoi(response.c_str() + space + 1), response.substr(body + 4)};
}

}  // namespace podscope::testing
