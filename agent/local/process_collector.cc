#include "agent/local/process_collector.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "proto/xspace/names.h"

namespace podscope::agent {
namespace {

// Reads a small /proc file into `buf` without allocating; returns the bytes read (0 when it is gone).
size_t read_small_file(const char* path, char* buf, size_t size) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = ::read(fd, buf, size - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  return static_cast<size_t>(n);
}

}  // namespace

ProcessCollector::ProcessCollector(std::shared_ptr<const ClientRegistry> registry, std::string proc_root)
    : registry_(std::move(registry)),
      proc_root_(std::move(proc_root)),
      ticks_per_second_(::sysconf(_SC_CLK_TCK)),
      page_size_(::sysconf(_SC_PAGESIZE)) {}

void ProcessCollector::sample(int64_t now_ns, SampleSink& sink) {
  registry_->registered_pids(pids_);
  for (int32_t pid : pids_) {
    auto it = series_.find(pid);
    if (it == series_.end()) {
      std::string program;
      for (const auto& c : registry_->clients())
        if (c.pid == pid) program = c.program;
      const std::vector<std::pair<std::string, std::string>> labels{{"pid", std::to_string(pid)}, {"program", program}};
      const std::string track = program + " (" + std::to_string(pid) + ")";
      Series s;
      s.cpu_seconds = sink.declare({"podscope_process_cpu_seconds_total", "CPU time of an annotated process",
                                    SeriesSpec::Kind::kCounter, labels, std::string(xspace::kHostPlaneName),
                                    track + " cpu seconds"});
      s.resident_bytes = sink.declare({"podscope_process_resident_bytes", "Resident memory of an annotated process",
                                       SeriesSpec::Kind::kGauge, labels, std::string(xspace::kHostPlaneName),
                                       track + " resident bytes"});
      it = series_.emplace(pid, s).first;
    }
    char path[128];
    char buf[1024];
    std::snprintf(path, sizeof(path), "%s/%d/stat", proc_root_.c_str(), pid);
    if (read_small_file(path, buf, sizeof(buf)) == 0) continue;  // it exited between listing and reading
    // Fields after the command name, which is in parentheses and may hold spaces: state is field 3,
    // utime 14, stime 15.
    const char* p = std::strrchr(buf, ')');
    if (!p) {
      state_.set(CollectorState::State::kDegraded, "unparsable /proc stat for a local client");
      continue;
    }
    p += 2;
    unsigned long long utime = 0, stime = 0;
    if (std::sscanf(p, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2) continue;
    sink.record(it->second.cpu_seconds, now_ns,
                static_cast<double>(utime + stime) / static_cast<double>(ticks_per_second_));
    std::snprintf(path, sizeof(path), "%s/%d/statm", proc_root_.c_str(), pid);
    if (read_small_file(path, buf, sizeof(buf)) == 0) continue;
    unsigned long long size = 0, resident = 0;
    if (std::sscanf(buf, "%llu %llu", &size, &resident) == 2) {
      sink.record(it->second.resident_bytes, now_ns, static_cast<double>(resident) * static_cast<double>(page_size_));
    }
    state_.set(CollectorState::State::kOk);
  }
}

}  // namespace podscope::agent
