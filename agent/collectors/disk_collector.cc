#include "agent/collectors/disk_collector.h"

#include <cctype>

namespace podscope::agent {
namespace {
constexpr std::array<std::string_view, 5> kMetrics = {
    "podscope_disk_reads_completed_total", "podscope_disk_writes_completed_total", "podscope_disk_read_bytes_total",
    "podscope_disk_written_bytes_total", "podscope_disk_io_time_seconds_total"};
constexpr double kSectorBytes = 512;  // diskstats counts 512-byte sectors whatever the device's block size

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with_digit(std::string_view s) { return !s.empty() && std::isdigit(static_cast<unsigned char>(s.back())); }
}  // namespace

bool is_ignored_disk(std::string_view d) {
  if (starts_with(d, "ram") || starts_with(d, "loop") || starts_with(d, "fd")) return true;
  // sda1, vdb2, xvda1, hda3: a letter-named disk followed by a partition number.
  for (std::string_view prefix : {"sd", "vd", "hd", "xvd"}) {
    if (starts_with(d, prefix) && d.size() > prefix.size() &&
        std::isalpha(static_cast<unsigned char>(d[prefix.size()])) && ends_with_digit(d)) {
      return true;
    }
  }
  // nvme0n1p1, mmcblk0p1
  if ((starts_with(d, "nvme") || starts_with(d, "mmcblk")) && d.find('p', 4) != std::string_view::npos &&
      ends_with_digit(d)) {
    return true;
  }
  return false;
}

absl::Status parse_diskstats(std::string_view text, std::string_view path, std::vector<DiskCounters>& out) {
  size_t count = 0;
  std::string_view line;
  int line_number = 0;
  while (next_line(text, line)) {
    ++line_number;
    std::string_view major, minor, device;
    if (!next_field(line, major)) continue;
    if (!next_field(line, minor) || !next_field(line, device)) {
      return parse_error(path, line_number, "expected 'major minor device counters...'");
    }
    std::array<uint64_t, 11> columns{};
    const absl::StatusOr<size_t> read = next_numbers(line, path, line_number, "device", device, columns);
    if (!read.ok()) return read.status();
    const size_t n = *read;
    if (n < 10) {
      return parse_error(path, line_number,
                         "device '" + std::string(device) + "' has " + std::to_string(n) + " counters, expected 11+");
    }
    if (is_ignored_disk(device)) continue;
    if (count == out.size()) out.emplace_back();
    DiskCounters& d = out[count++];
    d.device = device;
    d.values = {static_cast<double>(columns[0]), static_cast<double>(columns[4]),
                static_cast<double>(columns[2]) * kSectorBytes, static_cast<double>(columns[6]) * kSectorBytes,
                static_cast<double>(columns[9]) / 1000.0};
  }
  out.resize(count);
  return absl::OkStatus();
}

DiskCollector::DiskCollector(std::string path) : ProcFileCollector(std::move(path)) {}

absl::Status DiskCollector::record(std::string_view text, int64_t now_ns, SampleSink& sink) {
  if (absl::Status s = parse_diskstats(text, path(), parsed_); !s.ok()) return s;
  for (const DiskCounters& counters : parsed_) {
    const auto& ids = devices_.of(counters.device, sink, [](size_t m, const std::string& device) {
      const bool bytes = m == 2 || m == 3;
      return SeriesSpec{.metric = std::string(kMetrics[m]),
                        .help = "/proc/diskstats counters per device.",
                        .kind = SeriesSpec::Kind::kCounter,
                        .labels = {{"device", device}},
                        .plane = bytes ? "/host:CPU" : "",
                        .track = bytes ? "Disk " + device + (m == 2 ? " read" : " written") + " (bytes/s)" : ""};
    });
    for (size_t m = 0; m < kMetrics.size(); ++m) sink.record(ids[m], now_ns, counters.values[m]);
  }
  return absl::OkStatus();
}

}  // namespace podscope::agent
