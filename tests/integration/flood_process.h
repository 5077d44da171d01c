// For the capture-memory test and benchmark: annotation_flood processes against a real agent, its registered
// clients, and a Profile that returns the XSpace.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "podscope/v1/agent.grpc.pb.h"
#include "tensorflow/profiler_service.grpc.pb.h"
#include "tests/integration/agent_process.h"

namespace podscope::testing {

// One annotation_flood process (a step and `ops_per_step` computes, as fast as it can, on `threads` threads
// of `core`) at the lowest priority: the agent must keep up with trainers, not be starved by them. Killed and
// reaped on destruction.
class FloodProcess {
 public:
  FloodProcess(const std::string& socket, int core, int threads, int ops_per_step) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed on its timeout leaves no flood behind
      ::setpriority(PRIO_PROCESS, 0, 19);
      ::setenv("PODSCOPE_AGENT_SOCKET", socket.c_str(), 1);
      const std::string bin = std::string(PODSCOPE_BINARY_DIR) + "/bin/annotation_flood";
      const std::string c = std::to_string(core), t = std::to_string(threads), o = std::to_string(ops_per_step);
      ::execl(bin.c_str(), bin.c_str(), c.c_str(), t.c_str(), o.c_str(), nullptr);
      ::_exit(127);
    }
  }
  ~FloodProcess() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  FloodProcess(const FloodProcess&) = delete;
  FloodProcess& operator=(const FloodProcess&) = delete;

 private:
  pid_t pid_ = -1;
};

inline int registered_clients(const AgentProcess& agent) {
  auto stub = podscope::v1::Agent::NewStub(agent.channel());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  podscope::v1::AgentStatus status;
  if (!stub->GetStatus(&context, podscope::v1::StatusRequest(), &status).ok()) return 0;
  return status.clients_size();
}

// A Profile as TensorFlow's client sends it (max_events 1,000,000), the XSpace in the response.
inline grpc::Status profile_xspace(const AgentProcess& agent, int64_t duration_ms,
                                   tensorflow::ProfileResponse& response) {
  auto stub = tensorflow::ProfilerService::NewStub(agent.channel());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(duration_ms) +
                       std::chrono::seconds(60));
  tensorflow::ProfileRequest request;
  request.set_duration_ms(static_cast<uint64_t>(duration_ms));
  request.set_max_events(1'000'000);
  request.set_emit_xspace(true);
  return stub->Profile(&context, request, &response);
}

}  // namespace podscope::testing
