// TrainerProcess: one real ring_trainer rank (or a --spawn launcher) for integration tests, its output
// captured, always killed and reaped by the destructor. free_loopback_ports() picks ports for --peers.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace podscope::testing {

inline std::string trainer_binary() { return std::string(PODSCOPE_BINARY_DIR) + "/bin/ring_trainer"; }

// `n` distinct free TCP ports on 127.0.0.1 (bound to port 0, read back, released).
inline std::vector<int> free_loopback_ports(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot pick a free loopback port");
    }
    fds.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

inline std::string peers_flag(const std::vector<int>& ports) {
  std::string s;
  for (int p : ports) {
    if (!s.empty()) s += ',';
    s += "127.0.0.1:";
    s += std::to_string(p);
  }
  return s;
}

class TrainerProcess {
 public:
  TrainerProcess(std::vector<std::string> args, const std::string& agent_socket) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed on its timeout leaves no trainer behind
      ::dup2(out[1], STDERR_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::setenv("PODSCOPE_AGENT_SOCKET", agent_socket.c_str(), 1);
      std::vector<char*> argv;
      std::string bin = trainer_binary();
      argv.push_back(bin.data());
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    fd_ = out[0];
    ::fcntl(fd_, F_SETFL, O_NONBLOCK);
  }
  ~TrainerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }
  TrainerProcess(const TrainerProcess&) = delete;
  TrainerProcess& operator=(const TrainerProcess&) = delete;

  // Everything printed so far.
  const std::string& output() {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n <= 0) break;
      output_.append(buf, static_cast<size_t>(n));
    }
    return output_;
  }
  void signal(int sig) { ::kill(pid_, sig); }
  pid_t pid() const { return pid_; }
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      status_ = status;
      return false;
    }
    return true;
  }
  // The exit status (as from waitpid) within `timeout`, or nullopt.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (!running()) return status_;
      ::usleep(10000);
    }
    return std::nullopt;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  int status_ = 0;
  std::string output_;
};

}  // namespace podscope::testing
