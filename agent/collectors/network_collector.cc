#include "agent/collectors/network_collector.h"

namespace podscope::agent {
namespace {
// Named as node_exporter's netdev collector names them (receive_errs, receive_drop...), label `device` too, so
// that queries and dashboards written for node_exporter carry over with the prefix changed.
constexpr std::array<std::string_view, 8> kMetrics = {
    "podscope_network_receive_bytes_total",  "podscope_network_receive_packets_total",
    "podscope_network_receive_errs_total",   "podscope_network_receive_drop_total",
    "podscope_network_transmit_bytes_total", "podscope_network_transmit_packets_total",
    "podscope_network_transmit_errs_total",  "podscope_network_transmit_drop_total"};
// /proc/net/dev columns after the name: 8 receive fields, then transmit from column 8.
constexpr std::array<size_t, 8> kColumns = {0, 1, 2, 3, 8, 9, 10, 11};
}  // namespace

absl::Status parse_net_dev(std::string_view text, std::string_view path, std::vector<InterfaceCounters>& out) {
  size_t count = 0;
  std::string_view line;
  int line_number = 0;
  while (next_line(text, line)) {
    ++line_number;
    if (line_number <= 2) continue;  // two header lines
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      return parse_error(path, line_number, "expected 'interface: counters', got '" + std::string(line) + "'");
    }
    std::string_view name = line.substr(0, colon);
    name.remove_prefix(std::min(name.find_first_not_of(' '), name.size()));
    std::string_view rest = line.substr(colon + 1);
    std::array<uint64_t, 16> columns{};
    const absl::StatusOr<size_t> read = next_numbers(rest, path, line_number, "interface", name, columns);
    if (!read.ok()) return read.status();
    const size_t n = *read;
    if (n < 12) {
      return parse_error(path, line_number,
                         "interface '" + std::string(name) + "' has " + std::to_string(n) + " columns, expected 16");
    }
    if (count == out.size()) out.emplace_back();
    out[count].name = name;
    for (size_t i = 0; i < kColumns.size(); ++i) out[count].values[i] = columns[kColumns[i]];
    ++count;
  }
  if (line_number < 2) return parse_error(path, line_number, "missing header lines (truncated?)");
  out.resize(count);
  return absl::OkStatus();
}

NetworkCollector::NetworkCollector(std::string path) : ProcFileCollector(std::move(path)) {}

absl::Status NetworkCollector::record(std::string_view text, int64_t now_ns, SampleSink& sink) {
  if (absl::Status s = parse_net_dev(text, path(), parsed_); !s.ok()) return s;
  for (const InterfaceCounters& counters : parsed_) {
    const auto& ids = interfaces_.of(counters.name, sink, [](size_t m, const std::string& iface) {
      const bool bytes = m == 0 || m == 4;
      return SeriesSpec{.metric = std::string(kMetrics[m]),
                        .help = "/proc/net/dev counters per interface.",
                        .kind = SeriesSpec::Kind::kCounter,
                        .labels = {{"device", iface}},
                        .plane = bytes ? "/host:CPU" : "",
                        .track = bytes ? "Network " + iface + (m == 0 ? " received" : " sent") + " (bytes/s)" : ""};
    });
    for (size_t m = 0; m < kMetrics.size(); ++m) sink.record(ids[m], now_ns, static_cast<double>(counters.values[m]));
  }
  return absl::OkStatus();
}

}  // namespace podscope::agent
