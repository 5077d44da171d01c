// Captures include PyTorch processes: every Kineto process polling the agent is handed an on-demand trace
// request for the capture's window (its start in Unix ms, its duration, a trace file in a directory the agent
// owns under /tmp), at its next poll. Kineto polls every few seconds, so the window is planned that far ahead
// (start_lead). After the window the source waits, bounded, for each process's file, converts it
// (kineto/trace_file.h), merges its planes into the capture and deletes it; a process that never delivers is
// named in the capture's warnings and the rest is kept.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "agent/capture/capture_source.h"
#include "agent/kineto/kineto_processes.h"
#include "daemon/clock.h"

namespace podscope::agent {

class KinetoCaptureSource final : public CaptureSource {
 public:
  // Kineto takes up to about a second after a poll to act on the config it got: the margin on top of the
  // poll interval.
  static constexpr int64_t kConfigApplyMarginNs = int64_t{2} * 1'000'000'000;
  // How long past the window's end a process has to write its trace: this plus half the window's length, within
  // what a capture's caller waits (pod captures: twice the duration plus 10 s).
  static constexpr int64_t kDeliveryWaitNs = int64_t{8} * 1'000'000'000;

  KinetoCaptureSource(std::shared_ptr<KinetoProcesses> processes, const Clock& clock);
  ~KinetoCaptureSource() override;  // removes the trace directory

  std::string_view name() const override { return "kineto"; }
  StartLead start_lead() const override;
  void plan(const CaptureWindow& window) override;
  void open(const CaptureWindow& window) override;
  void close(int64_t end_ns) override;
  void collect(CaptureSpace& out) override;

 private:
  struct Requested {
    int32_t pid = 0;
    std::string log_file;
  };
  // Waits for one process's trace and merges it; returns a warning, empty when merged.
  std::string take_trace(const Requested& r, int64_t deadline_ns, int64_t wait_ns, tensorflow::profiler::XSpace& space);
  void remove_leftovers() const;

  std::shared_ptr<KinetoProcesses> processes_;
  const Clock& clock_;
  std::filesystem::path directory_;  // made by the first plan() with processes to trace
  uint64_t sequence_ = 0;

  // The planned window.
  int64_t planned_start_ns_ = 0;
  int64_t planned_end_ns_ = 0;
  int64_t closed_ns_ = 0;
  size_t memory_limit_bytes_ = 0;
  std::vector<Requested> requested_;
  std::string plan_warning_;
};

}  // namespace podscope::agent
