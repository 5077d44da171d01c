// Runs bin/kineto_poller (tests/integration/kineto_poller.cc: a Kineto process speaking the fabric's real bytes,
// honest or hostile) as a user a test chooses, and acts as a user: the local attackers and the other users' ranks
// of the Kineto handoff's tests are real processes with their own uids (the tests run as root and drop to them).
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace podscope::testing {

// Who a process runs as: root, or an unprivileged uid with no supplementary groups.
struct Identity {
  uid_t uid = 0;
  gid_t gid = 0;
  mode_t umask = 022;
};
// Users no test machine gives anything to: nobody's uid, and numbers no account has.
inline constexpr Identity kNobody{65534, 65534, 022};
inline constexpr Identity kAttacker{4242, 4242, 022};

// Takes on `who` in a forked child (groups, gid, uid, umask); false when the kernel refuses.
inline bool become(const Identity& who) {
  ::umask(who.umask);
  if (who.uid == 0) return true;
  return ::setgroups(0, nullptr) == 0 && ::setresgid(who.gid, who.gid, who.gid) == 0 &&
         ::setresuid(who.uid, who.uid, who.uid) == 0;
}

// Runs `act` as `who` in a child process; its return value (an errno, 0 for success) or -1 when it died.
inline int run_as(const Identity& who, const std::function<int()>& act) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (!become(who)) ::_exit(255);
    ::_exit(act());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class KinetoPoller {
 public:
  // Starts the poller on `socket_dir` (it binds its own socket file there: the directory must let `who` write)
  // with `args`, and waits for its "ready" line.
  KinetoPoller(const std::string& socket_dir, std::vector<std::string> args, Identity who = {}) {
    std::string bin = std::string(PODSCOPE_BINARY_DIR) + "/bin/kineto_poller";
    std::vector<std::string> all = {bin, socket_dir};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    int in[2];
    int out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      if (!become(who)) ::_exit(125);
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (output_.find("ready ") == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline || !read_some(200)) {
        throw std::runtime_error("kineto_poller not ready: " + output_);
      }
    }
    const size_t at = output_.find("ready ") + 6;
    first_pid_ = std::stoi(output_.substr(at, output_.find('\n', at) - at));
  }
  ~KinetoPoller() {
    ::close(stdin_);
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    ::close(stdout_);
  }
  KinetoPoller(const KinetoPoller&) = delete;
  KinetoPoller& operator=(const KinetoPoller&) = delete;

  // The (first) polling process.
  pid_t pid() const { return first_pid_; }
  // A trace request it was handed.
  struct Handed {
    std::string log_file;       // ACTIVITIES_LOG_FILE
    int64_t start_unix_ms = 0;  // PROFILE_START_TIME
  };
  // The requests it was handed so far.
  std::vector<Handed> handed() {
    std::lock_guard lock(mu_);
    while (read_some(0) && has_more_) {}
    std::vector<Handed> out;
    for (size_t at = output_.find("handed "); at != std::string::npos; at = output_.find("handed ", at + 1)) {
      const size_t end = output_.find('\n', at);
      if (end == std::string::npos) break;
      const std::string line = output_.substr(at + 7, end - at - 7);
      const size_t space = line.rfind(' ');
      out.push_back({line.substr(0, space), std::stoll(line.substr(space + 1))});
    }
    return out;
  }

 private:
  // Reads what is there (waits up to `timeout_ms`); false at EOF.
  bool read_some(int timeout_ms) {
    pollfd p{stdout_, POLLIN, 0};
    has_more_ = ::poll(&p, 1, timeout_ms) > 0;
    if (!has_more_) return true;
    char buf[4096];
    const ssize_t n = ::read(stdout_, buf, sizeof buf);
    if (n <= 0) return false;
    output_.append(buf, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  pid_t first_pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  std::mutex mu_;
  std::string output_;
  bool has_more_ = false;
};

}  // namespace podscope::testing
