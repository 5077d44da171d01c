// AgentProcess: runs the real podscope-agent binary on free loopback ports for a test, reads the ports from
// its "listening" line, and always kills and reaps it (destructor). Also a small gRPC/HTTP client kit.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "podscope/v1/agent.pb.h"
#include "tensorflow/profiler_service.pb.h"
#include "tests/eventually.h"
#include "tests/run_command.h"
#include "tests/scratch_directory.h"

namespace podscope::testing {

inline std::string agent_binary() { return std::string(PODSCOPE_BINARY_DIR) + "/bin/podscope-agent"; }

// What the agent process gets besides its arguments.
struct AgentEnvironment {
  std::string binary;                  // empty: this build's podscope-agent (a benchmark's baseline may name another)
  std::vector<std::string> variables;  // "NAME=value", over the test's own environment
  rlim_t open_file_limit = 0;          // soft and hard RLIMIT_NOFILE; 0 keeps the test's
  // A file the agent sees as /etc/hosts (in a mount namespace of its own; needs root): names resolve as a test says.
  std::string hosts_file;
  // A container's readOnlyRootFilesystem (in a mount namespace of its own; needs root): / read-only, these paths
  // (its volumes) writable.
  bool read_only_root = false;
  std::vector<std::string> writable_paths;
  // Root without any capability, as a container whose securityContext drops ALL.
  bool no_capabilities = false;
  // The agent's uid and gid, without supplementary groups (a unit's User=/Group=); 0: the test's.
  uid_t uid = 0;
  gid_t gid = 0;
};

// Applies `environment`'s namespace, capabilities and identity in the agent's child process; false on failure.
inline bool enter_agent_environment(const AgentEnvironment& environment) {
  if (!environment.hosts_file.empty() || environment.read_only_root) {
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  }
  if (!environment.hosts_file.empty() &&
      mount(environment.hosts_file.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) != 0) {
    return false;
  }
  if (environment.read_only_root) {
    for (const std::string& path : environment.writable_paths) {
      if (mount(path.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
    }
    if (mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) return false;
  }
  if (environment.no_capabilities) {
    // Without them in the bounding set, root's exec gets none.
    for (int cap = 0; cap <= 63; ++cap) {
      if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return false;
    }
  }
  if (environment.uid != 0 &&
      (setgroups(0, nullptr) != 0 || setresgid(environment.gid, environment.gid, environment.gid) != 0 ||
       setresuid(environment.uid, environment.uid, environment.uid) != 0)) {
    return false;
  }
  return true;
}

class AgentProcess {
 public:
  // Starts the agent with `args` (plus loopback ports and a private socket unless given) and waits for its
  // listening line. Throws with the agent's output if it exits or stays silent for 10 s.
  explicit AgentProcess(std::vector<std::string> args, bool wait_ready = true, AgentEnvironment environment = {}) {
    auto has = [&](const std::string& flag) {
      for (const auto& a : args) {
        if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
      }
      return false;
    };
    if (!has("--listen")) args.insert(args.end(), {"--listen", "127.0.0.1:0"});
    if (!has("--metrics_listen")) args.insert(args.end(), {"--metrics_listen", "127.0.0.1:0"});
    // Kineto's default endpoint is one per host: a test agent takes it only when a test asks.
    if (!has("--kineto_endpoint")) args.insert(args.end(), {"--kineto_endpoint", ""});
    if (!has("--socket")) {
      socket_dir_ = std::make_unique<ScratchDirectory>("agent_socket");
      args.insert(args.end(), {"--socket", socket_dir_->file("agent.sock")});
    }
    std::vector<char*> argv;
    std::string bin = environment.binary.empty() ? agent_binary() : environment.binary;
    argv.push_back(bin.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    auto overridden = [&](std::string_view variable) {
      for (const auto& v : environment.variables) {
        if (variable.substr(0, variable.find('=') + 1) == v.substr(0, v.find('=') + 1)) return true;
      }
      return false;
    };
    for (char** variable = environ; *variable != nullptr; ++variable) {
      if (!overridden(*variable)) envp.push_back(*variable);
    }
    for (auto& variable : environment.variables) envp.push_back(variable.data());
    envp.push_back(nullptr);
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed on its timeout leaves no agent behind
      dup2(out[1], STDERR_FILENO);
      dup2(out[1], STDOUT_FILENO);
      if (environment.open_file_limit > 0) {
        const rlimit limit{environment.open_file_limit, environment.open_file_limit};
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
      }
      if (!enter_agent_environment(environment)) _exit(125);
      execve(bin.c_str(), argv.data(), envp.data());
      _exit(127);
    }
    close(out[1]);
    output_fd_ = out[0];
    if (wait_ready) wait_for_ready();
  }
  ~AgentProcess() {
    if (pid_ > 0) stop();
    if (output_fd_ >= 0) close(output_fd_);
  }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  void wait_for_ready() {
    static const std::regex kListening(R"(listening grpc=[^ ]*:(\d+) metrics=[^ ]*:(\d+))");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::smatch m;
    while (!std::regex_search(output_, m, kListening)) {
      if (std::chrono::steady_clock::now() > deadline || !read_some(100)) {
        if (exited()) throw std::runtime_error("agent exited before listening: " + output_);
        if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("agent not ready: " + output_);
      }
    }
    grpc_port_ = std::stoi(m[1]);
    metrics_port_ = std::stoi(m[2]);
  }

  // Reads what the agent printed so far (waits up to `timeout_ms` for more); false on EOF.
  bool read_some(int timeout_ms) {
    pollfd p{output_fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return true;
    char buf[4096];
    const ssize_t n = read(output_fd_, buf, sizeof(buf));
    if (n <= 0) return false;
    output_.append(buf, static_cast<size_t>(n));
    return true;
  }
  // Reads what the agent prints until `text` is in it, up to `timeout` (or its output's end); whether it came.
  bool wait_for_output(std::string_view text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (output_.find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline || !read_some(50)) return output_.find(text) != std::string::npos;
    }
    return true;
  }
  // Waits for exit up to `timeout`; the exit status (as from waitpid) or nullopt on timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        while (read_some(0) && drained_once()) {}
        return status;
      }
      read_some(10);
    }
    return std::nullopt;
  }
  bool exited() {
    int status = 0;
    if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_status_ = status;
      return true;
    }
    return pid_ < 0;
  }
  void signal(int sig) { kill(pid_, sig); }
  // SIGTERM, as systemd stops it, so the agent removes what it made under /tmp; SIGKILL past 10 s.
  void stop() {
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (waitpid(pid_, nullptr, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  std::string grpc_address() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  // The directory of the private socket ("" where the test gave --socket).
  std::string socket_dir() const { return socket_dir_ ? socket_dir_->path().string() : std::string(); }

  std::shared_ptr<grpc::Channel> channel() const {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(INT_MAX);
    args.SetMaxSendMessageSize(INT_MAX);
    return grpc::CreateCustomChannel(grpc_address(), grpc::InsecureChannelCredentials(), args);
  }

 private:
  bool drained_once() {
    pollfd p{output_fd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
  pid_t pid_ = -1;
  int output_fd_ = -1;
  int exit_status_ = 0;
  std::string output_;
  std::unique_ptr<ScratchDirectory> socket_dir_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
};

// GET http://127.0.0.1:port/path; the body, or throws.
std::string http_get(int port, const std::string& path);

// A /proc/<pid>/status field in KiB (VmRSS, VmHWM), -1 when absent.
inline int64_t status_kib(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  }
  return -1;
}

// Resets the kernel's peak-RSS mark (VmHWM) of `pid` to its current RSS.
inline void reset_peak_rss(pid_t pid) { std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5"; }

// A Profile request of `duration_ms` (and `session`, when given) that asks for the XSpace in the answer.
tensorflow::ProfileRequest profile_request(uint64_t duration_ms, const std::string& session = "");
// The agent's answer to a Profile call with `deadline`: the call's status and the answer.
struct ProfileOutcome {
  grpc::Status status;
  tensorflow::ProfileResponse response;
};
ProfileOutcome profile(const AgentProcess& agent, const tensorflow::ProfileRequest& request,
                       std::chrono::seconds deadline = std::chrono::seconds(30));

// The agent's answer to GetStatus (10 s deadline); nullopt when the call fails.
std::optional<podscope::v1::AgentStatus> try_agent_status(const AgentProcess& agent);
// The agent's answer to GetStatus; throws with the agent's output when the call fails.
podscope::v1::AgentStatus agent_status(const AgentProcess& agent);
// The agent knows exactly `processes` Kineto processes and each one's poll interval (it has polled twice).
bool kineto_pollers_known(const AgentProcess& agent, int processes);

}  // namespace podscope::testing
