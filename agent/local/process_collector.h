// Per registered local client (annotated process): CPU time and resident memory from /proc/<pid>.
// Series are declared the first time a pid is seen; a pid that left simply stops being sampled.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/collectors/collector.h"
#include "agent/collectors/proc_text.h"
#include "agent/local/client_registry.h"

namespace podscope::agent {

class ProcessCollector : public Collector {
 public:
  // `proc_root` is "/proc" except in tests.
  explicit ProcessCollector(std::shared_ptr<const ClientRegistry> registry, std::string proc_root = "/proc");

  std::string_view name() const override { return "process"; }
  CollectorState status() const override { return state_.get(); }
  void sample(int64_t now_ns, SampleSink& sink) override;

 private:
  // A registered pid's /proc files, kept open between passes and closed once it is no longer registered.
  struct PidFiles {
    explicit PidFiles(const std::string& pid_dir) : stat(pid_dir + "/stat"), statm(pid_dir + "/statm") {}
    ProcFile stat;
    ProcFile statm;
  };
  // Declared once per pid and kept: a pid that registers again reports into the same series.
  struct Series {
    SeriesId cpu_seconds;
    SeriesId resident_bytes;
    std::unique_ptr<PidFiles> files;
  };
  std::map<int32_t, Series>::iterator declare(int32_t pid, SampleSink& sink);
  void close_files_of_departed_pids();

  std::shared_ptr<const ClientRegistry> registry_;
  std::string proc_root_;
  CollectorStateCell state_;
  std::vector<int32_t> pids_;
  std::map<int32_t, Series> series_;
  long ticks_per_second_;
  long page_size_;
};

}  // namespace podscope::agent
