#include "agent/local/process_collector.h"

#include <unistd.h>

#include <algorithm>

#include "proto/xspace/names.h"

namespace podscope::agent {
namespace {

// utime and stime (fields 14 and 15 of /proc/<pid>/stat) in clock ticks. The fields are counted after the
// command name, which is in parentheses and may hold spaces: the first after it is the state (field 3).
bool parse_cpu_ticks(std::string_view stat, uint64_t& ticks) {
  const size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos) return false;
  std::string_view rest = stat.substr(paren + 1);
  std::string_view field;
  for (int i = 3; i < 14; ++i) {
    if (!next_field(rest, field)) return false;
  }
  uint64_t utime = 0, stime = 0;
  if (!next_field(rest, field) || !parse_number(field, utime)) return false;
  if (!next_field(rest, field) || !parse_number(field, stime)) return false;
  ticks = utime + stime;
  return true;
}

// The resident set in pages: the second field of /proc/<pid>/statm.
bool parse_resident_pages(std::string_view statm, uint64_t& pages) {
  std::string_view field;
  return next_field(statm, field) && next_field(statm, field) && parse_number(field, pages);
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
    if (it == series_.end()) it = declare(pid, sink);
    Series& series = it->second;
    if (series.files == nullptr) series.files = std::make_unique<PidFiles>(proc_root_ + "/" + std::to_string(pid));
    std::string_view text;
    if (!series.files->stat.read(text).ok()) continue;  // it exited between listing and reading
    uint64_t ticks = 0;
    if (!parse_cpu_ticks(text, ticks)) {
      state_.set(CollectorState::State::kDegraded, "unparsable /proc stat for a local client");
      continue;
    }
    sink.record(series.cpu_seconds, now_ns, static_cast<double>(ticks) / static_cast<double>(ticks_per_second_));
    if (!series.files->statm.read(text).ok()) continue;
    uint64_t pages = 0;
    if (parse_resident_pages(text, pages)) {
      sink.record(series.resident_bytes, now_ns, static_cast<double>(pages) * static_cast<double>(page_size_));
    }
    state_.set(CollectorState::State::kOk);
  }
  close_files_of_departed_pids();
}

// A pid that registers again after a pass without it opens its files afresh: a reused pid is the new process.
void ProcessCollector::close_files_of_departed_pids() {
  for (auto& [pid, series] : series_) {
    if (series.files != nullptr && std::find(pids_.begin(), pids_.end(), pid) == pids_.end()) series.files.reset();
  }
}

std::map<int32_t, ProcessCollector::Series>::iterator ProcessCollector::declare(int32_t pid, SampleSink& sink) {
  std::string program;
  for (const auto& c : registry_->clients())
    if (c.pid == pid) program = c.program;
  const std::vector<std::pair<std::string, std::string>> labels{{"pid", std::to_string(pid)}, {"program", program}};
  const std::string track = program + " (" + std::to_string(pid) + ")";
  const SeriesId cpu_seconds =
      sink.declare({"podscope_process_cpu_seconds_total", "CPU time of an annotated process",
                    SeriesSpec::Kind::kCounter, labels, std::string(xspace::kHostPlaneName), track + " cpu seconds"});
  const SeriesId resident_bytes =
      sink.declare({"podscope_process_resident_bytes", "Resident memory of an annotated process",
                    SeriesSpec::Kind::kGauge, labels, std::string(xspace::kHostPlaneName), track + " resident bytes"});
  return series_.emplace(pid, Series{cpu_seconds, resident_bytes, nullptr}).first;
}

}  // namespace podscope::agent
