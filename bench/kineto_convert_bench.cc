// Kineto trace conversion (torch.profiler's Chrome JSON → XPlanes: read, parse, build) against a plain simdjson DOM
// parse of the same file, measured in the same run, each in a fresh child process so its peak RSS is its own.
// The trace is a real one (default: the shared 2-rank NCCL job's rank 0), uncompressed as Kineto wrote it, or with
// its events repeated `--repeat` times, re-serialized without whitespace (denser than Kineto's indented text, so
// a harsher case for memory over file size). Prints events/s on one core (CPU time) and peak memory over the file's
// size, with the ratios to the plain parse.
//   kineto_convert_bench [--trace PATH.pt.trace.json[.gz]] [--repeat 1] [--runs 5]
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "bench/pod_bench.h"
#include "kineto/trace_file.h"

namespace {

namespace fs = std::filesystem;
using namespace podscope::bench;

// The baseline: load the file and parse it whole with simdjson's DOM parser, counting the events.
int measure_parse(const fs::path& file) {
  const Measurement m;
  simdjson::dom::parser parser;
  simdjson::padded_string json;
  if (simdjson::padded_string::load(file.string()).get(json) != simdjson::SUCCESS) return 1;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) return 1;
  simdjson::dom::array events;
  if (doc["traceEvents"].get_array().get(events) != simdjson::SUCCESS) return 1;
  return m.print(events.size());
}

int measure_convert(const fs::path& file) {
  const Measurement m;
  absl::StatusOr<tensorflow::profiler::XSpace> space = podscope::kineto::read_kineto_trace_file(file);
  if (!space.ok()) {
    std::cerr << space.status() << "\n";
    return 1;
  }
  uint64_t events = 0;
  for (const auto& p : space->planes()) {
    for (const auto& l : p.lines()) events += static_cast<uint64_t>(l.events_size());
  }
  return m.print(events);
}

// The trace's events `repeat` times over, uncompressed, with its header.
uint64_t write_repeated(const fs::path& source, int repeat, const fs::path& out, uint64_t& trace_events) {
  std::string text;
  {
    const std::string command = "zcat -f '" + source.string() + "'";
    FILE* pipe = popen(command.c_str(), "r");
    char buffer[1 << 16];
    for (size_t n; pipe && (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
    if (pipe) pclose(pipe);
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(text);
  std::ofstream o(out, std::ios::binary);
  if (repeat == 1) {  // the trace as Kineto wrote it, byte for byte
    trace_events = doc["traceEvents"].get_array().size();
    o << text;
    o.close();
    return fs::file_size(out);
  }
  o << "{";
  for (auto [key, value] : doc.get_object()) {
    if (key == "traceEvents") continue;
    o << "\"" << key << "\": " << simdjson::minify(value) << ", ";
  }
  o << "\"traceEvents\": [";
  trace_events = 0;
  bool first = true;
  for (int r = 0; r < repeat; ++r) {
    for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
      if (!first) o << ",\n";
      first = false;
      o << simdjson::minify(e);
      ++trace_events;
    }
  }
  o << "]}\n";
  o.close();
  return fs::file_size(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--measure") == 0) {
    const std::string mode = argv[2];
    if (mode == "parse") return measure_parse(argv[3]);
    if (mode == "convert") return measure_convert(argv[3]);
    return 2;
  }
  fs::path trace = fs::path(PODSCOPE_SOURCE_DIR) / "../shared/testdata/kineto/nccl_2rank_rank0.pt.trace.json.gz";
  int repeat = 1, runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--trace") trace = argv[i + 1];
    else if (flag == "--repeat") repeat = std::stoi(argv[i + 1]);
    else if (flag == "--runs") runs = std::stoi(argv[i + 1]);
  }
  if (!fs::exists(trace)) {
    std::cerr << "no trace at " << trace << " (pass --trace PATH)\n";
    return 2;
  }
  const fs::path dir = fs::temp_directory_path() / ("kineto_convert_bench_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "bench.pt.trace.json";
  uint64_t trace_events = 0;
  const uint64_t bytes = write_repeated(trace, repeat, file, trace_events);
  Figures parse, convert;
  for (int i = 0; i < runs; ++i) {
    keep_best(parse, run_child("kineto_convert_bench", "parse", file), i == 0);
    keep_best(convert, run_child("kineto_convert_bench", "convert", file), i == 0);
  }
  fs::remove_all(dir);
  const double mib = static_cast<double>(bytes) / (1 << 20);
  auto report = [&](const char* name, const Figures& f) {
    std::printf("%-28s %8.3f s cpu %8.3f s wall %10.0f trace events/s (cpu) %8.1f MiB peak = %5.2fx the file\n", name,
                f.cpu_seconds, f.seconds, static_cast<double>(trace_events) / f.cpu_seconds,
                static_cast<double>(f.peak_rss_kb) / 1024, static_cast<double>(f.peak_rss_kb) / 1024 / mib);
  };
  std::printf("trace: %s x%d = %llu events, %.1f MiB uncompressed\n", trace.c_str(), repeat,
              static_cast<unsigned long long>(trace_events), mib);
  report("plain simdjson DOM parse", parse);
  report("Kineto → XPlanes", convert);
  std::printf("conversion / plain parse: %.2fx the CPU time, %.2fx the peak memory; %llu XEvents written\n",
              convert.cpu_seconds / parse.cpu_seconds,
              static_cast<double>(convert.peak_rss_kb) / static_cast<double>(parse.peak_rss_kb),
              static_cast<unsigned long long>(convert.events));
  return 0;
}
