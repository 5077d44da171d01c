// What building a host's analysis database costs the agent after a bucket capture, per event: the agent's own calls
// (describe_capture: the capture read plane by plane into its summary and its host analysis; then the database
// bytes upload_host_database writes, tied to the uploaded object's size and version), against a plain XSpace parse of
// the same bytes measured in the same run. Each measurement runs in a child process of its own, on bytes already in
// memory, with the free heap given back first (malloc_trim), so its CPU time (user + system) and its peak RSS above
// what it held before (VmHWM after clear_refs) are its own. Captures: real recorded ones (the shared TensorFlow BERT
// host, tests/data's GPU host and a ring trainer rank) and generated ring-trainer ranks of growing size
// (tests/analysis/synthetic_pod.h: an annotated rank and a TensorFlow GPU host each).
// Usage: host_database_bench [--files a.xplane.pb,b.xplane.pb] [--generated-events-per-step 100,1000,10000,40000]
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "agent/capture/bucket_uploads.h"
#include "analysis/runner/analysis_runner.h"
#include "podscope/v1/host_analysis.pb.h"
#include "tensorflow/xplane.pb.h"
#include "tests/analysis/synthetic_pod.h"

namespace {

struct Capture {
  std::string name;
  std::string bytes;
  int64_t events = 0;
};

int64_t events_of(const std::string& bytes) {
  tensorflow::profiler::XSpace space;
  if (!space.ParseFromString(bytes)) return 0;
  int64_t events = 0;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) events += line.events_size();
  }
  return events;
}

int64_t status_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const size_t length = std::strlen(field);
  while (std::getline(status, line)) {
    if (line.compare(0, length, field) == 0) return std::atoll(line.c_str() + length);
  }
  return 0;
}

double cpu_s() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

struct Cost {
  double cpu_s = 0;
  double peak_mib = 0;  // peak RSS above what the process held before
};

// Runs `work` in a child that holds what its parent held (the capture's bytes): its CPU time and peak RSS increment.
template <typename Work>
Cost in_child(Work work) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) std::exit(1);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    // Free heap pages the parent left resident would be reused without growing the RSS: give them back, then reset
    // the high-water mark to what the child holds now.
    malloc_trim(0);
    std::ofstream("/proc/self/clear_refs") << "5";
    const int64_t before_kib = status_kib("VmRSS:");
    const double cpu_before = cpu_s();
    work();
    Cost cost{cpu_s() - cpu_before, static_cast<double>(status_kib("VmHWM:") - before_kib) / 1024.0};
    if (write(pipe_fds[1], &cost, sizeof cost) != sizeof cost) _exit(1);
    _exit(0);
  }
  close(pipe_fds[1]);
  Cost cost;
  if (read(pipe_fds[0], &cost, sizeof cost) != sizeof cost) {
    std::fprintf(stderr, "a measurement's child failed\n");
    std::exit(1);
  }
  close(pipe_fds[0]);
  waitpid(pid, nullptr, 0);
  return cost;
}

// What the agent computes for a bucket capture before it uploads: its description (summary and analysis) and the
// database bytes beside the file.
void build_host_database(const Capture& capture) {
  const podscope::agent::CaptureDescription description = podscope::agent::describe_capture(capture.bytes, "host");
  podscope::v1::HostAnalysis analysis;
  if (description.host_analysis.empty() || !analysis.ParseFromString(description.host_analysis)) {
    std::fprintf(stderr, "%s: no host analysis\n", capture.name.c_str());
    _exit(1);
  }
  // The version is the bucket's answer to the upload (an ETag or a generation), not computed here.
  const podscope::storage::ObjectInfo uploaded{"host.xplane.pb", capture.bytes.size(), "\"etag-of-the-upload\""};
  const auto database = podscope::analysis::host_database(uploaded, analysis);
  if (!database.ok()) {
    std::fprintf(stderr, "%s: %s\n", capture.name.c_str(), std::string(database.status().message()).c_str());
    _exit(1);
  }
}

std::vector<Capture> recorded(const std::vector<std::string>& paths) {
  std::vector<Capture> out;
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "skipping %s: cannot read it\n", path.c_str());
      continue;
    }
    std::ostringstream bytes;
    bytes << in.rdbuf();
    out.push_back({path.substr(path.rfind('/') + 1), bytes.str(), 0});
  }
  return out;
}

std::vector<Capture> generated(const std::vector<int>& events_per_step) {
  std::vector<Capture> out;
  for (int per_step : events_per_step) {
    podscope::analysis::testing::SyntheticPodSpec spec;
    spec.ranks = 2;
    spec.steps = 20;
    spec.compute_events_per_step = per_step;
    spec.tensorflow_gpu_odd_ranks = true;
    for (int rank = 0; rank < 2; ++rank) {
      out.push_back({std::string(rank == 0 ? "generated annotated" : "generated TF GPU") + ", " +
                         std::to_string(per_step) + "/step",
                     podscope::analysis::testing::make_synthetic_rank(spec, rank).SerializeAsString(), 0});
    }
  }
  return out;
}

// Least squares of `y` over the events: {fixed, per event}.
std::array<double, 2> fit(const std::vector<std::array<double, 3>>& points, size_t y) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& p : points) {
    sx += p[0];
    sy += p[y];
    sxx += p[0] * p[0];
    sxy += p[0] * p[y];
  }
  const double n = static_cast<double>(points.size());
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  return {(sy - slope * sx) / n, slope};
}

}  // namespace

int main(int argc, char** argv) {
  std::string files = std::string(PODSCOPE_SOURCE_DIR) + "/../shared/testdata/tf_bert_8gpu_host0.xplane.pb," +
                      PODSCOPE_SOURCE_DIR + "/tests/data/analysis/cuda_nvtx_steps/gpuhost.xplane.pb," +
                      PODSCOPE_SOURCE_DIR + "/tests/data/analysis/ring_trainer_offsets/host0.xplane.pb";
  std::string generated_sizes = "100,1000,10000,40000";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--files") == 0) files = argv[i + 1];
    if (std::strcmp(argv[i], "--generated-events-per-step") == 0) generated_sizes = argv[i + 1];
  }
  std::vector<int> sizes;
  for (const std::string& size : std::vector<std::string>(absl::StrSplit(generated_sizes, ',', absl::SkipEmpty())))
    sizes.push_back(std::atoi(size.c_str()));
  std::vector<Capture> captures = recorded(std::vector<std::string>(absl::StrSplit(files, ',', absl::SkipEmpty())));
  for (Capture& capture : generated(sizes)) captures.push_back(std::move(capture));

  std::printf("host database per capture (describe_capture + host_database) vs a plain XSpace parse, same run\n");
  std::printf("%-36s %9s %7s | %8s %9s | %9s %9s | %10s %10s | %6s %6s\n", "capture", "events", "MiB", "db CPU s",
              "peak MiB", "parse CPU", "peak MiB", "µs / event", "KiB / k ev", "× CPU", "× peak");
  // (events, CPU s, peak MiB) of every capture, for the cost per event beyond a fixed part.
  std::vector<std::array<double, 3>> points;
  for (Capture& capture : captures) {
    capture.events = events_of(capture.bytes);
    if (capture.events == 0) continue;
    const Cost parse = in_child([&] {
      tensorflow::profiler::XSpace space;
      if (!space.ParseFromString(capture.bytes)) _exit(1);
    });
    const Cost database = in_child([&] { build_host_database(capture); });
    const double events = static_cast<double>(capture.events);
    points.push_back({events, database.cpu_s, database.peak_mib});
    std::printf("%-36s %9lld %7.2f | %8.3f %9.1f | %9.3f %9.1f | %10.3f %10.1f | %6.2f %6.2f\n", capture.name.c_str(),
                static_cast<long long>(capture.events), static_cast<double>(capture.bytes.size()) / (1 << 20),
                database.cpu_s, database.peak_mib, parse.cpu_s, parse.peak_mib, database.cpu_s * 1e6 / events,
                database.peak_mib * 1024 * 1000 / events, parse.cpu_s > 0 ? database.cpu_s / parse.cpu_s : 0.0,
                parse.peak_mib > 0 ? database.peak_mib / parse.peak_mib : 0.0);
  }
  if (points.size() >= 2) {
    const auto cpu = fit(points, 1);
    const auto peak = fit(points, 2);
    std::printf(
        "fitted over every capture: CPU %.2f s per million events + %.3f s; peak RSS %.1f MiB per million "
        "events + %.1f MiB\n",
        cpu[1] * 1e6, cpu[0], peak[1] * 1e6, peak[0]);
  }
  return 0;
}
