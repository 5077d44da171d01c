// What the benchmarks over generated pod files share: the pod generator, and measurements that each run in a child
// process (`<program> --measure MODE DIR`), so that its peak memory is its own, printing "seconds cpu_seconds
// events peak_kb [output_bytes]". CPU time is what the ratios use: other work on a shared machine inflates wall
// time far more than CPU time.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "proto/xspace/xplane_builder.h"
#include "tests/analysis/synthetic_pod.h"

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

// What a measured child prints for its parent (run_child): wall and CPU seconds since it was made, the events it
// handled, and its peak RSS growth in kB.
struct Measurement {
  long rss_before = proc_status_kb("VmRSS");
  double cpu_start = cpu_seconds();
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  int print(uint64_t events) const {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << seconds << " " << cpu_seconds() - cpu_start << " " << events << " "
              << proc_status_kb("VmHWM") - rss_before << "\n";
    return 0;
  }
};

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

// The best run (least CPU: the machine is shared, the minimum is the least disturbed) with the largest peak.
inline void keep_best(Figures& best, const Figures& run, bool first) {
  const long peak = first ? run.peak_rss_kb : std::max(best.peak_rss_kb, run.peak_rss_kb);
  if (first || run.cpu_seconds < best.cpu_seconds) best = run;
  best.peak_rss_kb = peak;
}

// The flags of every benchmark over a generated pod: its size, how many runs the best is kept of, and whether its work
// directory is kept.
struct PodFlags {
  int cores = 64;
  int events_per_core = 0;
  int cores_per_file = 8;
  int repeat = 1;
  bool keep = false;
};

// Takes the flag's value (the argument after it).
using FlagValueFn = std::function<std::string()>;

// Reads the pod's flags into `flags`, and hands any other to `own_flag`, which says whether it knew it. An unknown
// flag is printed and false returned; a flag without its value throws.
inline bool parse_pod_flags(int argc, char** argv, PodFlags& flags,
                            const std::function<bool(const std::string& flag, const FlagValueFn& value)>& own_flag) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const FlagValueFn next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--cores") flags.cores = std::stoi(next());
    else if (arg == "--events-per-core") flags.events_per_core = std::stoi(next());
    else if (arg == "--cores-per-file") flags.cores_per_file = std::stoi(next());
    else if (arg == "--repeat") flags.repeat = std::max(1, std::stoi(next()));
    else if (arg == "--keep") flags.keep = true;
    else if (!own_flag(arg, next)) {
      std::cerr << "unknown argument " << arg << "\n";
      return false;
    }
  }
  return true;
}

// A synthetic pod of `cores` ranks (rank 3 a 5 ms straggler, 2 ms input delay), about `events_per_core` events each,
// in one file per `cores_per_file` cores written one at a time (the generator never holds the pod either). With
// `every_tool`, files alternate between annotated hosts (/device:CUSTOM: planes with input-stage spans) and
// TensorFlow GPU hosts (/device:GPU: planes whose kernels carry kernel_details and tf_op, CUDA launches on
// /host:CUPTI, tf.data iterator events, executor op TraceMes and allocator events on /host:CPU), so that every tool
// does real work.
inline void write_synthetic_pod(const std::filesystem::path& dir, int cores, int events_per_core, int cores_per_file,
                                bool every_tool = false) {
  analysis::testing::SyntheticPodSpec spec;
  spec.ranks = cores;
  spec.steps = 100;
  // Per step: compute events + infeed + all-reduce + 2×chunks send/recv-done.
  spec.compute_events_per_step = std::max(1, events_per_core / spec.steps - 6);
  spec.input_delay_ns = 2'000'000;
  spec.straggler_rank = 3;
  spec.straggler_delay_ns = 5'000'000;
  std::filesystem::create_directories(dir);
  for (int first = 0; first < cores; first += cores_per_file) {
    tensorflow::profiler::XSpace host;
    const bool gpu_host = every_tool && (first / cores_per_file) % 2 == 1;
    spec.input_stages = every_tool && !gpu_host;
    spec.gpu_plane = gpu_host;
    spec.tf_data_events = gpu_host;
    spec.tf_ops_and_memory = gpu_host;
    for (int rank = first; rank < std::min(cores, first + cores_per_file); ++rank) {
      xspace::merge_space(analysis::testing::make_synthetic_rank(spec, rank), host);
    }
    std::ofstream out(dir / ("host" + std::to_string(first / cores_per_file) + ".xplane.pb"), std::ios::binary);
    host.SerializeToOstream(&out);
  }
}

}  // namespace podscope::bench
