// Writing the pod's Perfetto trace, streamed, beside the streaming XSpace reader alone over the same files,
// on a generated pod (default 64 cores x 320,000 events = 20.5 M events in 8 files). Each measurement runs
// in a fresh child process (this binary re-executed) so its peak RSS is its own (counted from its RSS before
// it starts). Ratios use CPU time, as other work on a shared machine inflates wall time far more.
//
//   trace_bench [--cores 64] [--events-per-core 320000] [--cores-per-file 8] [--repeat 3] [--with-json] [--keep]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/pod_bench.h"
#include "trace_writers/perfetto_trace.h"
#include "trace_writers/pod_trace.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xspace_stream_reader.h"
#include "tests/analysis/synthetic_pod.h"

namespace {

namespace fs = std::filesystem;
using namespace podscope::bench;  // the shared pod-benchmark kit (bench/pod_bench.h)
using Clock = std::chrono::steady_clock;

// Child modes print "seconds cpu_seconds events peak_kb output_bytes".
int measure(const std::string& mode, const fs::path& dir) {
  const long rss_before = proc_status_kb("VmRSS");
  const double cpu_start = cpu_seconds();
  const auto start = Clock::now();
  uint64_t events = 0, output_bytes = 0;
  const fs::path out_dir = dir / "out";
  fs::create_directories(out_dir);
  if (mode == "traces") {
    auto files = podscope::trace_writers::write_run_traces(dir, {});
    if (!files.ok()) {
      std::cerr << files.status() << "\n";
      return 1;
    }
    events = files->counts.slices + files->counts.counter_values;
    output_bytes = fs::file_size(files->perfetto) + fs::file_size(files->json);
    fs::remove(files->perfetto);
    fs::remove(files->json);
  } else {
    podscope::run_directory::StreamedFile file;
    std::optional<podscope::trace_writers::PerfettoTraceWriter> writer;
    if (mode == "perfetto") {
      if (auto s = podscope::run_directory::RunDirectory(out_dir).open_streamed(
              "pod.perfetto-trace", podscope::run_directory::StreamedFile::Compression::kNone, file);
          !s.ok()) {
        std::cerr << s << "\n";
        return 1;
      }
      writer.emplace(file);
    }
    for (const auto& path : xspace_files(dir)) {
      const absl::Status status = podscope::xspace::read_xspace_planes(path, [&](const auto& plane) {
        for (const auto& line : plane.lines()) events += static_cast<uint64_t>(line.events_size());
        if (writer) writer->add_plane({"host", 0}, plane);
        return absl::OkStatus();
      });
      if (!status.ok()) {
        std::cerr << status << "\n";
        return 1;
      }
    }
    if (writer) {
      writer->finish();
      if (auto s = file.commit(); !s.ok()) {
        std::cerr << s << "\n";
        return 1;
      }
      output_bytes = fs::file_size(out_dir / "pod.perfetto-trace");
      fs::remove(out_dir / "pod.perfetto-trace");
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << seconds << " " << cpu_seconds() - cpu_start << " " << events << " "
            << proc_status_kb("VmHWM") - rss_before << " " << output_bytes << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--measure") == 0) return measure(argv[2], argv[3]);
  PodFlags flags{.events_per_core = 320'000, .repeat = 3};
  bool with_json = false;
  const bool parsed = parse_pod_flags(argc, argv, flags, [&](const std::string& flag, const FlagValueFn&) {
    if (flag != "--with-json") return false;
    with_json = true;
    return true;
  });
  if (!parsed) return 2;
  const fs::path work = fs::temp_directory_path() / ("podscope_trace_bench_" + std::to_string(getpid()));
  try {
    const auto start = Clock::now();
    write_synthetic_pod(work, flags.cores, flags.events_per_core, flags.cores_per_file);
    uint64_t input_bytes = 0, largest = 0;
    const auto files = xspace_files(work);
    for (const auto& f : files) {
      input_bytes += fs::file_size(f);
      largest = std::max<uint64_t>(largest, fs::file_size(f));
    }
    std::printf("generated %d cores x %d events in %zu files (%.1f MiB, largest %.1f MiB) in %.1f s\n", flags.cores,
                flags.events_per_core, files.size(), input_bytes / 1048576.0, largest / 1048576.0,
                std::chrono::duration<double>(Clock::now() - start).count());
    Figures read, perfetto, traces;
    for (int i = 0; i < flags.repeat; ++i) {  // interleaved, so a slow spell of the machine hits both alike
      keep_best(read, run_child("trace_bench", "read", work), i == 0);
      keep_best(perfetto, run_child("trace_bench", "perfetto", work), i == 0);
    }
    if (with_json) traces = run_child("trace_bench", "traces", work);
    auto line = [&](const char* what, const Figures& f) {
      std::printf("  %-34s %7.2f s CPU (%7.2f s wall)  %5.2f M events/s  peak %7.1f MiB", what, f.cpu_seconds,
                  f.seconds, read.events / f.cpu_seconds / 1e6, f.peak_rss_kb / 1024.0);
      if (f.output_bytes) std::printf("  %.1f bytes/event", static_cast<double>(f.output_bytes) / read.events);
      std::printf("\n");
    };
    std::printf("\n== %llu events (best of %d runs)\n", static_cast<unsigned long long>(read.events), flags.repeat);
    line("streaming reader alone (baseline):", read);
    line("pod.perfetto-trace written:", perfetto);
    if (with_json) line("both traces (JSON gzip + Perfetto):", traces);
    std::printf("  Perfetto / reader CPU time: %.2fx (target <= 2x); peak %.1f MiB (target <= 512 MiB)\n",
                perfetto.cpu_seconds / read.cpu_seconds, perfetto.peak_rss_kb / 1024.0);
  } catch (const std::exception& e) {
    std::cerr << "trace_bench: " << e.what() << "\n";
    if (!flags.keep) fs::remove_all(work);
    return 1;
  }
  if (!flags.keep) fs::remove_all(work);
  return 0;
}
