// A write_file_atomically cut off for real: a child process writes `bytes` × 4 under a file-size limit of `bytes`,
// so the kernel kills it (SIGXFSZ) in the middle of the write, leaving the temporary file as a crash or a kill -9
// would. Call before the test starts threads (the child runs the writer after fork).
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "daemon/atomic_file.h"

namespace podscope::testing {

inline bool interrupt_a_write(const std::filesystem::path& path, size_t bytes) {
  const pid_t child = fork();
  if (child == 0) {
    const rlimit limit{bytes, bytes};
    setrlimit(RLIMIT_FSIZE, &limit);
    signal(SIGXFSZ, SIG_DFL);
    (void)write_file_atomically(path, std::string(bytes * 4, 'x'));
    _exit(0);
  }
  int status = 0;
  return child > 0 && waitpid(child, &status, 0) == child && WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ;
}

}  // namespace podscope::testing
