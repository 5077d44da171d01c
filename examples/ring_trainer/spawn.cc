#include "examples/ring_trainer/spawn.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace ring_trainer {
namespace {

std::atomic<int> g_forward_signal{0};
void remember_signal(int sig) { g_forward_signal.store(sig); }

}  // namespace

int spawn_ranks(int world, const std::vector<std::string>& child_args, const std::vector<std::string>& agent_sockets) {
  struct sigaction sa {};
  sa.sa_handler = remember_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  std::vector<pid_t> children;
  for (int rank = 0; rank < world; ++rank) {
    std::vector<std::string> args = child_args;
    args.push_back("--rank");
    args.push_back(std::to_string(rank));
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("ring_trainer --spawn: fork");
      for (pid_t c : children) ::kill(c, SIGTERM);
      return 1;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // ranks do not outlive their launcher, however it ends
      if (rank < static_cast<int>(agent_sockets.size()))
        ::setenv("PODSCOPE_AGENT_SOCKET", agent_sockets[rank].c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      std::perror("ring_trainer --spawn: exec");
      ::_exit(127);
    }
    children.push_back(pid);
  }
  int worst = 0;
  size_t running = children.size();
  bool forwarded = false;
  while (running > 0) {
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, 0);
    if (done < 0) {
      if (errno != EINTR) break;
      if (const int sig = g_forward_signal.load(); sig != 0 && !forwarded) {
        forwarded = true;
        for (pid_t c : children) ::kill(c, sig);
      }
      continue;
    }
    --running;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && worst == 0) {
      std::fprintf(stderr, "ring_trainer --spawn: a rank (pid %d) exited with status %d; stopping the others\n",
                   static_cast<int>(done), code);
      for (pid_t c : children) ::kill(c, SIGTERM);
    }
    if (code > worst) worst = code;
  }
  return worst;
}

}  // namespace ring_trainer
