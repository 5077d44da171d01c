// Captures include PyTorch processes: every Kineto process polling the agent is handed an on-demand trace
// request for the capture's window (its start in Unix ms, its duration, a trace file in its uid's directory under
// `kineto_trace_dir`, kineto_trace_directory.h), at its next poll. Kineto polls every few seconds, so the window
// is planned that far ahead (start_lead, at most KinetoProcesses::kMaxAwaitedPollIntervalNs + the margin). After the
// window the source waits, bounded, for each process's file, takes it only if it is a regular file of the process's
// uid, converts it (kineto/trace_file.h) within what the capture's memory budget leaves, merges its planes into the
// capture and deletes it. A process that never delivers, or delivers what is refused, is named in the capture's
// warnings, the refusal counted by reason, and the rest is kept.
#pragma once

#include <cstdint>
#include <filesystem>
#include <array>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "agent/capture/capture_source.h"
#include "agent/kineto/kineto_processes.h"
#include "agent/kineto/kineto_trace_directory.h"
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

  // What converting a trace may hold at its peak, per byte of its (uncompressed) text: the text, simdjson's
  // structural index (4 bytes per token: up to 4 per byte of dense text) and a growing gzip output's old buffer.
  // A trace is taken only when this much of it fits in what the capture's memory budget leaves.
  static constexpr uint64_t kConversionBytesPerTextByte = 6;

  // What the handoff did with the traces it asked for, since the agent started.
  struct TraceCounts {
    uint64_t merged = 0;
    std::vector<std::pair<std::string, uint64_t>> refused;  // by reason, every reason listed
  };

  KinetoCaptureSource(std::shared_ptr<KinetoProcesses> processes, const Clock& clock,
                      const std::filesystem::path& trace_root, prometheus::Registry& registry,
                      const std::string& host_name);
  ~KinetoCaptureSource() override;

  std::string_view name() const override { return "kineto"; }
  StartLead start_lead() const override;
  void plan(const CaptureWindow& window) override;
  void open(const CaptureWindow& window) override;
  void close(int64_t end_ns) override;
  void collect(CaptureSpace& out) override;

  TraceCounts trace_counts() const;

 private:
  struct Requested {
    int32_t pid = 0;
    uint32_t uid = 0;
    std::string file_name;  // in the uid's directory, as Kineto names what it delivers
  };
  // Waits for one process's trace and merges it, charging it to `held_bytes`; returns a warning, empty when merged.
  std::string take_trace(const Requested& r, int64_t deadline_ns, int64_t wait_ns, tensorflow::profiler::XSpace& space,
                         uint64_t& held_bytes);
  // Converts an opened trace within `max_text_bytes`; a warning, empty when merged.
  std::string merge_trace(const Requested& r, const OpenedTrace& trace, uint64_t max_text_bytes,
                          tensorflow::profiler::XSpace& space, uint64_t& held_bytes);
  std::string refuse_trace(TraceRefusal refusal, const std::string& warning);

  std::shared_ptr<KinetoProcesses> processes_;
  const Clock& clock_;
  KinetoTraceDirectory directory_;
  uint64_t sequence_ = 0;
  prometheus::Counter& merged_;
  std::array<prometheus::Counter*, kTraceRefusalCount> refused_{};

  // The planned window.
  int64_t planned_start_ns_ = 0;
  int64_t planned_end_ns_ = 0;
  int64_t closed_ns_ = 0;
  size_t memory_limit_bytes_ = 0;
  std::vector<Requested> requested_;
  std::string plan_warning_;
};

}  // namespace podscope::agent
