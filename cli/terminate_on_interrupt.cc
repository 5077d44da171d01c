#include "cli/terminate_on_interrupt.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <iostream>

namespace podscope::cli {
namespace {

// A signal handler can only reach process-wide state: the write end of the self-pipe of the one active
// TerminateOnInterrupt, and whether a signal already came.
std::atomic<int> g_signal_pipe{-1};
std::atomic<bool> g_signalled{false};

constexpr char kSignalByte = 's';
constexpr char kStopByte = 'q';

void on_signal(int) {
  if (g_signalled.exchange(true)) _exit(130);
  const int fd = g_signal_pipe.load();
  if (fd >= 0) {
    const char byte = kSignalByte;
    [[maybe_unused]] const ssize_t n = write(fd, &byte, 1);
  }
}

}  // namespace

TerminateOnInterrupt::TerminateOnInterrupt(std::vector<pod_capture::AgentConnection*> agents, std::string session_id)
    : agents_(std::move(agents)), session_id_(std::move(session_id)) {
  if (pipe2(pipe_, O_CLOEXEC) != 0) return;  // no pipe: Ctrl-C keeps its default meaning
  g_signalled = false;
  g_signal_pipe = pipe_[1];
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
  watcher_ = std::thread([this] { watch(); });
}

TerminateOnInterrupt::~TerminateOnInterrupt() {
  if (pipe_[0] < 0) return;
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  g_signal_pipe = -1;
  const char byte = kStopByte;
  [[maybe_unused]] const ssize_t n = write(pipe_[1], &byte, 1);
  watcher_.join();
  close(pipe_[0]);
  close(pipe_[1]);
}

void TerminateOnInterrupt::watch() {
  char byte = 0;
  while (read(pipe_[0], &byte, 1) < 0 && errno == EINTR) {}
  if (byte != kSignalByte) return;
  interrupted_ = true;
  std::cerr << "\nInterrupted: ending the capture on every host now (again to abort)\n";
  for (auto* agent : agents_) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    tensorflow::TerminateRequest request;
    request.set_session_id(session_id_);
    tensorflow::TerminateResponse response;
    agent->profiler->Terminate(&context, request, &response);
  }
}

}  // namespace podscope::cli
