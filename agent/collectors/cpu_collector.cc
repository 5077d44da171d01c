#include "agent/collectors/cpu_collector.h"

#include <unistd.h>

#include <algorithm>

namespace podscope::agent {

uint64_t CpuTimes::total() const {
  uint64_t sum = 0;
  for (uint64_t j : jiffies) sum += j;
  return sum;
}

absl::Status parse_proc_stat(std::string_view text, std::string_view path, CpuTimes& total,
                             std::vector<CpuTimes>& cores) {
  size_t core_count = 0;
  bool saw_total = false;
  std::string_view line;
  int line_number = 0;
  while (next_line(text, line)) {
    ++line_number;
    std::string_view label;
    if (!next_field(line, label) || label.substr(0, 3) != "cpu") continue;
    CpuTimes times;
    if (label.size() > 3 && !parse_number(label.substr(3), times.cpu)) {
      return parse_error(path, line_number, "bad cpu label '" + std::string(label) + "'");
    }
    // Old kernels stop before steal; a line with fewer than the first four modes is truncated.
    size_t fields = 0;
    std::string_view field;
    while (fields < times.jiffies.size() && next_field(line, field)) {
      if (!parse_number(field, times.jiffies[fields])) {
        return parse_error(path, line_number,
                           "cpu line '" + std::string(label) + "' field " + std::to_string(fields + 1) +
                               " is not a number: '" + std::string(field) + "'");
      }
      ++fields;
    }
    if (fields < 4) {
      return parse_error(
          path, line_number,
          "cpu line '" + std::string(label) + "' has " + std::to_string(fields) + " fields, expected at least 4");
    }
    if (times.cpu < 0) {
      total = times;
      saw_total = true;
    } else {
      if (core_count == cores.size()) cores.emplace_back();
      cores[core_count++] = times;
    }
  }
  cores.resize(core_count);
  if (!saw_total) return parse_error(path, line_number, "no 'cpu' total line");
  return absl::OkStatus();
}

CpuCollector::CpuCollector(std::string path)
    : ProcFileCollector(std::move(path)), seconds_per_jiffy_(1.0 / static_cast<double>(sysconf(_SC_CLK_TCK))) {
  cores_.reserve(1024);
}

void CpuCollector::declare_core(Core& core, SampleSink& sink) {
  const std::string cpu = std::to_string(core.cpu);
  for (size_t m = 0; m < kCpuModes.size(); ++m) {
    core.seconds[m] =
        sink.declare({.metric = "podscope_cpu_seconds_total",
                      .help = "Seconds the CPUs spent in each mode (as node_exporter's node_cpu_seconds_total).",
                      .kind = SeriesSpec::Kind::kCounter,
                      .labels = {{"cpu", cpu}, {"mode", std::string(kCpuModes[m])}}});
  }
  core.utilization = sink.declare({.metric = "podscope_cpu_utilization_ratio",
                                   .help = "Share of the last sampling period each core was busy (not idle or iowait).",
                                   .labels = {{"cpu", cpu}},
                                   .plane = "/host:CPU",
                                   .track = "CPU " + cpu + " utilization"});
}

absl::Status CpuCollector::record(std::string_view text, int64_t now_ns, SampleSink& sink) {
  if (absl::Status s = parse_proc_stat(text, path(), total_, parsed_); !s.ok()) return s;
  if (!host_declared_) {
    host_utilization_ = sink.declare({.metric = "podscope_host_cpu_utilization_ratio",
                                      .help = "Share of the last sampling period all cores together were busy.",
                                      .plane = "/host:CPU",
                                      .track = "CPU utilization"});
    host_declared_ = true;
  }
  for (const CpuTimes& times : parsed_) {
    Core* core = nullptr;
    for (Core& c : cores_) {
      if (c.cpu == times.cpu) core = &c;
    }
    if (core == nullptr) {  // a core seen for the first time (start, or hotplug)
      core = &cores_.emplace_back();
      core->cpu = times.cpu;
      declare_core(*core, sink);
    }
    for (size_t m = 0; m < kCpuModes.size(); ++m) {
      sink.record(core->seconds[m], now_ns, static_cast<double>(times.jiffies[m]) * seconds_per_jiffy_);
    }
    if (core->has_previous && times.total() > core->previous.total()) {
      const double dt = static_cast<double>(times.total() - core->previous.total());
      const double didle = static_cast<double>(times.idle()) - static_cast<double>(core->previous.idle());
      sink.record(core->utilization, now_ns, std::clamp(1.0 - didle / dt, 0.0, 1.0));
    }
    core->previous = times;
    core->has_previous = true;
  }
  if (has_previous_total_ && total_.total() > previous_total_.total()) {
    const double dt = static_cast<double>(total_.total() - previous_total_.total());
    const double didle = static_cast<double>(total_.idle()) - static_cast<double>(previous_total_.idle());
    sink.record(host_utilization_, now_ns, std::clamp(1.0 - didle / dt, 0.0, 1.0));
  }
  previous_total_ = total_;
  has_previous_total_ = true;
  {
    std::lock_guard lock(totals_mu_);
    totals_ = {total_.total() - total_.idle(), total_.total(), static_cast<int>(parsed_.size())};
  }
  return absl::OkStatus();
}

CpuCollector::Totals CpuCollector::totals() const {
  std::lock_guard lock(totals_mu_);
  return totals_;
}

}  // namespace podscope::agent
