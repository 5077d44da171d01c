// What the file benchmarks share: each measurement runs in a child process (`<program> --measure MODE DIR`), so its
// peak memory is its own, and prints "seconds cpu_seconds events peak_kb [output_bytes]" on stdout. CPU time is
// what the ratios use: other work on a shared machine inflates wall time far more than CPU time.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace podscope::bench {

struct Figures {
  double seconds = 0;      // wall clock
  double cpu_seconds = 0;  // user + system
  long peak_rss_kb = 0;    // the child's peak RSS minus what it held before measuring (code, libraries)
  uint64_t events = 0;
  uint64_t output_bytes = 0;  // when the mode writes a file
};

inline std::vector<std::filesystem::path> xspace_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().ends_with(".xplane.pb")) files.push_back(e.path());
  }
  return files;
}

// A kB figure from /proc/self/status ("VmRSS", "VmHWM").
inline long proc_status_kb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  }
  return 0;
}

inline double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Runs this program again as `program --measure MODE DIR` and reads the figures it prints.
inline Figures run_child(const char* program, const std::string& mode, const std::filesystem::path& dir) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    execl("/proc/self/exe", program, "--measure", mode.c_str(), dir.c_str(), nullptr);
    _exit(127);
  }
  close(pipe_fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("measurement " + mode + " failed");
  Figures f;
  std::istringstream(out) >> f.seconds >> f.cpu_seconds >> f.events >> f.peak_rss_kb >> f.output_bytes;
  return f;
}

}  // namespace podscope::bench
