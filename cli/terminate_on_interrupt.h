// While `podscope capture` runs, Ctrl-C or SIGTERM asks every agent to end the capture now
// (ProfilerService/Terminate with the session id): they answer Profile with what they collected so far and
// the files are written as usual. A second signal exits at once (code 130).
#pragma once

#include <atomic>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "pod_capture/agent_connection.h"

namespace podscope::cli {

class TerminateOnInterrupt {
 public:
  TerminateOnInterrupt(std::vector<pod_capture::AgentConnection*> agents, std::string session_id);
  ~TerminateOnInterrupt();  // restores the previous handlers
  TerminateOnInterrupt(const TerminateOnInterrupt&) = delete;
  TerminateOnInterrupt& operator=(const TerminateOnInterrupt&) = delete;

  bool interrupted() const { return interrupted_.load(); }

 private:
  void watch();
  std::vector<pod_capture::AgentConnection*> agents_;
  std::string session_id_;
  int pipe_[2] = {-1, -1};
  std::atomic<bool> interrupted_{false};
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
  std::thread watcher_;
};

}  // namespace podscope::cli
