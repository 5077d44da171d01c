#include "examples/ring_trainer/ring_allreduce.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "client/podscope.h"

namespace ring_trainer {
namespace {

std::runtime_error sys_error(const std::string& what) { return std::runtime_error(what + ": " + std::strerror(errno)); }

sockaddr_in resolve(const Endpoint& e) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(e.host.c_str(), nullptr, &hints, &res) != 0 || !res) {
    throw std::runtime_error("cannot resolve peer host '" + e.host + "'");
  }
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  addr.sin_port = htons(static_cast<uint16_t>(e.port));
  return addr;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

RingAllReduce::RingAllReduce(int rank, const std::vector<Endpoint>& peers, int connect_timeout_ms)
    : rank_(rank), world_(static_cast<int>(peers.size())) {
  std::string group = "{";
  for (int i = 0; i < world_; ++i) {
    if (i > 0) group += ',';
    group += std::to_string(i);
  }
  replica_group_name_ = podscope::intern(group + "}");
  if (world_ <= 1) return;

  const int listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in own = resolve(peers[rank]);
  if (peers[rank].host != "127.0.0.1" && peers[rank].host != "localhost") own.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(listen_fd, reinterpret_cast<sockaddr*>(&own), sizeof(own)) != 0 || ::listen(listen_fd, 4) != 0) {
    const auto err =
        sys_error("rank " + std::to_string(rank) + " cannot listen on port " + std::to_string(peers[rank].port));
    ::close(listen_fd);
    throw err;
  }
  // Connect to the next rank while accepting the previous one (each may start in any order).
  const int next = (rank + 1) % world_;
  const sockaddr_in next_addr = resolve(peers[next]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(connect_timeout_ms);
  while (next_fd_ < 0 || prev_fd_ < 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::close(listen_fd);
      throw std::runtime_error("rank " + std::to_string(rank) + ": ring not formed within " +
                               std::to_string(connect_timeout_ms) + " ms (next rank " + std::to_string(next) + " at " +
                               peers[next].host + ":" + std::to_string(peers[next].port) +
                               (next_fd_ < 0 ? " unreachable" : " connected, previous rank missing") + ")");
    }
    if (next_fd_ < 0) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&next_addr), sizeof(next_addr)) == 0) {
        const int32_t me = rank;
        if (::send(fd, &me, sizeof(me), MSG_NOSIGNAL) == sizeof(me)) {
          next_fd_ = fd;
          set_nodelay(fd);
        } else {
          ::close(fd);
        }
      } else {
        ::close(fd);
      }
    }
    if (prev_fd_ < 0) {
      pollfd p{listen_fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        int32_t who = -1;
        if (fd >= 0 && ::recv(fd, &who, sizeof(who), MSG_WAITALL) == sizeof(who) &&
            who == (rank + world_ - 1) % world_) {
          prev_fd_ = fd;
          set_nodelay(fd);
        } else if (fd >= 0) {
          ::close(fd);
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ::close(listen_fd);
  sender_ = std::thread([this] { send_loop(); });
}

RingAllReduce::~RingAllReduce() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (sender_.joinable()) sender_.join();
  if (next_fd_ >= 0) ::close(next_fd_);
  if (prev_fd_ >= 0) ::close(prev_fd_);
}

void RingAllReduce::send_all(const char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(next_fd_, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) throw sys_error("send to rank " + std::to_string((rank_ + 1) % world_));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void RingAllReduce::recv_all(char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::recv(prev_fd_, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0) throw std::runtime_error("rank " + std::to_string((rank_ + world_ - 1) % world_) + " closed the ring");
    if (k < 0) throw sys_error("recv from rank " + std::to_string((rank_ + world_ - 1) % world_));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void RingAllReduce::send_loop() {
  const int next = (rank_ + 1) % world_;
  for (;;) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return send_pending_ || stop_; });
    if (stop_) return;
    const char* p = send_ptr_;
    const size_t n = send_bytes_;
    const uint32_t channel = send_channel_;
    lock.unlock();
    std::string error;
    try {
      auto span = podscope::send(channel, next, static_cast<int64_t>(n));
      send_all(p, n);
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    send_pending_ = false;
    send_done_ = true;
    send_error_ = error;
    cv_.notify_all();
  }
}

void RingAllReduce::run(ModelBuffer& data, int64_t step) {
  auto span = podscope::all_reduce(step, static_cast<int64_t>(data.size() * sizeof(float)), replica_group_name_);
  if (world_ <= 1) return;
  const int prev = (rank_ + world_ - 1) % world_;
  const size_t n = data.size();
  auto chunk_begin = [&](int c) { return n * static_cast<size_t>(c) / static_cast<size_t>(world_); };
  auto chunk_size = [&](int c) { return chunk_begin(c + 1) - chunk_begin(c); };
  auto mod = [&](int v) { return ((v % world_) + world_) % world_; };
  StepBuffer incoming(n / static_cast<size_t>(world_) + 1);

  for (int t = 0; t < 2 * (world_ - 1); ++t) {
    const bool reduce = t < world_ - 1;
    const int s = reduce ? t : t - (world_ - 1);
    const int send_chunk = reduce ? mod(rank_ - s) : mod(rank_ + 1 - s);
    const int recv_chunk = reduce ? mod(rank_ - s - 1) : mod(rank_ - s);
    {
      std::lock_guard lock(mu_);
      send_ptr_ = reinterpret_cast<const char*>(data.data() + chunk_begin(send_chunk));
      send_bytes_ = chunk_size(send_chunk) * sizeof(float);
      send_channel_ = channel_id(t, rank_, world_);
      send_pending_ = true;
      send_done_ = false;
    }
    cv_.notify_all();
    const size_t count = chunk_size(recv_chunk);
    {
      auto recv = podscope::recv_done(channel_id(t, prev, world_), prev, static_cast<int64_t>(count * sizeof(float)));
      recv_all(reinterpret_cast<char*>(incoming.data()), count * sizeof(float));
    }
    float* dst = data.data() + chunk_begin(recv_chunk);
    if (reduce) {
      for (size_t i = 0; i < count; ++i) dst[i] += incoming[i];
    } else {
      std::memcpy(dst, incoming.data(), count * sizeof(float));
    }
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return send_done_; });
    if (!send_error_.empty()) throw std::runtime_error(send_error_);
  }
}

}  // namespace ring_trainer
