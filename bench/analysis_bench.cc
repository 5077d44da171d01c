// Pod analysis throughput and peak memory, end to end (read *.xplane.pb + every tool + all outputs written), without
// the file writes, and each tool alone (the step database with the pod viewer and the step tools, tf.data, kernel
// stats, the memory profile, op stats), beside a plain protobuf parse of the same files measured in the same run. Two
// kinds of input:
//   - a generated pod that gives every tool work (annotated hosts with input stages; TensorFlow GPU hosts with
//     kernels, their ops and launches, tf.data events, executor ops and allocator events);
//   - real captures of a fast trainer: the bench starts a podscope-agent and two ring_trainer ranks (--matrix 64
//     --grad_bytes 65536, thousands of steps a second each) and captures them with `podscope capture` for each of
//     --real-captures seconds (the capture's wall time is printed), or takes --tf-file. The events each capture's
//     memory budget dropped are printed beside its figures (the ratios are per kept event: parse and analysis read
//     the same file); across the capture lengths it prints k of CPU ~ events^k per mode (1 = linear).
// Each measurement runs in a fresh child process (this binary re-executed) so its peak RSS is its own (counted from
// the child's RSS before it starts measuring). Figures are printed as ratios to the baseline. Everything it starts
// is stopped and its work directory (the agent's sockets included) removed; the work directories of runs that
// were killed before they could remove theirs are removed when the next run starts. No Google Benchmark here: each
// figure is a whole child process's CPU time.
//
//   analysis_bench [--cores 64] [--events-per-core 200000] [--cores-per-file 8] [--repeat 5] [--tf-file PATH]
//                  [--real-captures 1,2,4 | none] [--keep]
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/pod_bench.h"
#include "daemon/heap.h"
#include "analysis/tools/input_pipeline.h"
#include "analysis/rendering/json_writer.h"
#include "analysis/tools/kernel_stats.h"
#include "analysis/tools/memory_profile.h"
#include "analysis/tools/op_stats.h"
#include "analysis/tools/overview_page.h"
#include "analysis/rendering/renderers.h"
#include "analysis/runner/analysis_runner.h"
#include "analysis/tools/tool.h"
#include "analysis/steps/pod_steps.h"
#include "analysis/steps/step_database.h"
#include "analysis/tools/tf_data_stats.h"
#include "analysis/tools/tool_pages.h"
#include "proto/xspace/names.h"
#include "proto/xspace/serialize.h"
#include "proto/xspace/xplane_reader.h"
#include "tests/analysis/synthetic_pod.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace {

namespace fs = std::filesystem;
using namespace podscope::bench;  // the shared pod-benchmark kit (bench/pod_bench.h)
using Clock = std::chrono::steady_clock;

uint64_t input_bytes(const fs::path& dir) {
  uint64_t total = 0;
  for (const auto& f : xspace_files(dir)) total += fs::file_size(f);
  return total;
}

// Child modes: print "seconds cpu_seconds events peak_kb" on stdout, the peak counted from the RSS at the start
// (the peak RSS of the process minus what it held before measuring: code, libraries).

int measure_parse(const fs::path& dir) {
  const long rss_before = proc_status_kb("VmRSS");
  const double cpu_start = cpu_seconds();
  const auto start = Clock::now();
  uint64_t events = 0;
  // The plain parse keeps every XSpace, as a reader that loads the files before analysing them would.
  std::vector<tensorflow::profiler::XSpace> spaces;
  for (const auto& f : xspace_files(dir)) {
    std::ifstream in(f, std::ios::binary);
    tensorflow::profiler::XSpace space;
    if (!space.ParseFromIstream(&in)) {
      std::cerr << "cannot parse " << f << "\n";
      return 1;
    }
    for (const auto& p : space.planes()) {
      for (const auto& l : p.lines()) events += l.events_size();
    }
    spaces.push_back(std::move(space));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << seconds << " " << cpu_seconds() - cpu_start << " " << events << " "
            << proc_status_kb("VmHWM") - rss_before << "\n";
  return 0;
}

// Streams the files' planes (only the lines `wants_line` keeps) into `add_plane`, file by file.
template <typename AddPlane, typename FileDone>
bool stream_planes(const fs::path& dir, const podscope::xspace::XLineFilter& wants_line, AddPlane&& add_plane,
                   FileDone&& file_done) {
  auto files = xspace_files(dir);
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i < files.size(); ++i) {
    podscope::xspace::XSpaceHeader header;
    const absl::Status status = podscope::xspace::read_xspace_planes(
        files[i],
        [&](const auto& plane) {
          add_plane(i, plane);
          return absl::OkStatus();
        },
        &header, wants_line);
    if (!status.ok()) {
      std::cerr << status << "\n";
      return false;
    }
    file_done(i, header);
  }
  return true;
}

namespace tp = tensorflow::profiler;

// Every pod-viewer output but the report, rendered into memory.
size_t render_pod_viewer_outputs(const podscope::v1::PodAnalysis& analysis) {
  size_t rendered = podscope::analysis::render_summary_text(analysis).size();
  rendered += podscope::analysis::render_pod_viewer_json(analysis)->size();
  rendered += podscope::analysis::render_pod_viewer_proto_json(analysis)->size();
  rendered += analysis.SerializeAsString().size();
  return rendered;
}

// Every pod-viewer output, the report showing the pod viewer alone.
size_t render_pod_outputs(const podscope::v1::PodAnalysis& analysis) {
  const std::vector<podscope::analysis::ReportTab> tabs = {
      {"pod", "Pod viewer", "", "", "pod", *podscope::analysis::message_to_json(analysis, false)}};
  return render_pod_viewer_outputs(analysis) + podscope::analysis::render_report_html(tabs, "bench").size();
}

// A tool's .pb and .json, as the runner writes them.
size_t render_tool_files(const google::protobuf::Message& message) {
  return podscope::xspace::serialize_deterministically(message)->size() +
         podscope::analysis::message_to_json(message, false)->size();
}

// Every step-tool output (.pb, .json and the terminal pages), rendered into memory.
size_t render_step_tool_outputs(const tensorflow::profiler::OverviewPage& overview,
                                const tensorflow::profiler::InputPipelineAnalysisResult& input_pipeline) {
  size_t rendered = podscope::analysis::render_overview_text(overview).size();
  rendered += podscope::analysis::render_input_pipeline_text(input_pipeline).size();
  for (const google::protobuf::Message* message : {static_cast<const google::protobuf::Message*>(&overview),
                                                   static_cast<const google::protobuf::Message*>(&input_pipeline)}) {
    rendered += podscope::xspace::serialize_deterministically(*message)->size();
    rendered += podscope::analysis::message_to_json(*message, true)->size();
  }
  return rendered;
}

// Everything `podscope analyze` does, files written (temp file + fsync + rename per output).
int measure_analysis(const fs::path& dir) {
  const Measurement m;
  auto outcome = podscope::analysis::analyze_run_directory(dir);
  if (!outcome.ok()) {
    std::cerr << outcome.status() << "\n";
    return 1;
  }
  return m.print(outcome->analysis.counts().events());
}

// The same work without the durable writes: read, analyse and render every output into memory.
int measure_analysis_in_memory(const fs::path& dir) {
  const Measurement m;
  auto outcome = podscope::analysis::analyze_run_files(dir);
  if (!outcome.ok()) {
    std::cerr << outcome.status() << "\n";
    return 1;
  }
  const auto& o = *outcome;
  size_t rendered = render_pod_viewer_outputs(o.analysis) +
                    render_step_tool_outputs(o.result<tensorflow::profiler::OverviewPage>(),
                                             o.result<tensorflow::profiler::InputPipelineAnalysisResult>());
  rendered += podscope::analysis::render_report_html(*podscope::analysis::report_tabs(o), "bench").size();
  rendered +=
      render_tool_files(o.result<tensorflow::profiler::CombinedTfDataStats>()) +
      render_tool_files(o.result<podscope::analysis::KernelStatsResult>().db) +
      render_tool_files(o.result<podscope::analysis::OpStatsResult>().db) +
      o.result<podscope::analysis::MemoryProfileResult>().profile.SerializeAsString().size() +
      podscope::analysis::render_memory_profile_json(o.result<podscope::analysis::MemoryProfileResult>().profile)
          ->size();
  if (rendered == 0) return 1;
  return m.print(outcome->analysis.counts().events());
}

// The step database alone and the tools that read it (the pod viewer, the overview page, the input pipeline
// analyzer), outputs rendered into memory.
int measure_step_tools(const fs::path& dir) {
  const Measurement m;
  std::vector<podscope::v1::HostStepDatabase> hosts;
  std::unique_ptr<podscope::analysis::HostStepDatabaseBuilder> builder;
  const bool ok = stream_planes(
      dir, podscope::analysis::HostStepDatabaseBuilder::wants_line,
      [&](size_t, const auto& plane) {
        if (!builder) builder = std::make_unique<podscope::analysis::HostStepDatabaseBuilder>();
        builder->add_plane(plane);
      },
      [&](size_t i, const podscope::xspace::XSpaceHeader& header) {
        if (!builder) builder = std::make_unique<podscope::analysis::HostStepDatabaseBuilder>();
        hosts.push_back(std::move(*builder).finish(header.hostnames, podscope::analysis::FileSteps::in_memory_stem(i)));
        builder.reset();
      });
  if (!ok) return 1;
  const podscope::analysis::PodSteps pod = podscope::analysis::merge_step_databases(hosts);
  const auto analysis = podscope::analysis::analyze_pod_steps(pod);
  const auto input_pipeline = podscope::analysis::pod_steps_to_input_pipeline(pod);
  const auto overview = podscope::analysis::pod_steps_to_overview_page(pod, input_pipeline);
  if (render_pod_outputs(analysis) + render_step_tool_outputs(overview, input_pipeline) == 0) return 1;
  return m.print(analysis.counts().events());
}

// tf.data alone: the host planes that name iterators and the annotated input stages, combined and rendered.
int measure_tf_data(const fs::path& dir) {
  const Measurement m;
  std::vector<podscope::analysis::HostTfDataStats> hosts;
  const auto wants_line = [](std::string_view plane, std::string_view line) {
    return plane == podscope::xspace::kHostPlaneName || (plane.starts_with(podscope::xspace::kCustomPlanePrefix) &&
                                                         line == podscope::xspace::kInputPipelineLineName);
  };
  const bool ok = stream_planes(
      dir, wants_line,
      [&](size_t i, const tp::XPlane& plane) {
        const std::string host = "host" + std::to_string(i);
        if (plane.name() == podscope::xspace::kHostPlaneName) {
          if (podscope::analysis::names_tf_data_iterators(plane)) {
            hosts.push_back({host, podscope::analysis::xplane_to_tf_data_stats(plane)});
          }
        } else if (plane.name().starts_with(podscope::xspace::kCustomPlanePrefix)) {
          hosts.push_back({host, podscope::analysis::input_stages_to_tf_data_stats(plane)});
        }
      },
      [](size_t, const podscope::xspace::XSpaceHeader&) {});
  if (!ok) return 1;
  const tp::CombinedTfDataStats combined = podscope::analysis::combine_tf_data_stats(std::move(hosts));
  if (render_tool_files(combined) + podscope::analysis::tf_data_stats_to_text(combined).size() == 0) return 1;
  return m.print(0);
}

int measure_kernel_stats(const fs::path& dir) {
  const Measurement m;
  podscope::analysis::KernelStatsBuilder builder;
  const bool ok = stream_planes(
      dir, podscope::analysis::KernelStatsBuilder::wants_line,
      [&](size_t, const tp::XPlane& plane) { builder.add_plane(plane); },
      [&](size_t, const podscope::xspace::XSpaceHeader&) { builder.end_file(); });
  if (!ok) return 1;
  const podscope::analysis::KernelStatsResult result = std::move(builder).finish();
  if (render_tool_files(result.db) + podscope::analysis::render_kernel_stats_page(result).size() == 0) return 1;
  return m.print(result.kernel_launches);
}

int measure_memory_profile(const fs::path& dir) {
  const Measurement m;
  podscope::analysis::MemoryProfileBuilder builder;
  const bool ok = stream_planes(
      dir, podscope::analysis::MemoryProfileBuilder::wants_line,
      [&](size_t i, const tp::XPlane& plane) { builder.add_plane(i, plane); },
      [](size_t, const podscope::xspace::XSpaceHeader&) {});
  if (!ok) return 1;
  const podscope::analysis::MemoryProfileResult result = std::move(builder).finish();
  const size_t rendered = result.profile.SerializeAsString().size() +
                          podscope::analysis::render_memory_profile_json(result.profile)->size() +
                          podscope::analysis::render_memory_profile_page(result).size();
  if (rendered == 0) return 1;
  return m.print(result.events);
}

int measure_op_stats(const fs::path& dir) {
  const Measurement m;
  podscope::analysis::OpStatsBuilder builder;
  const bool ok = stream_planes(
      dir, podscope::analysis::OpStatsBuilder::wants_line,
      [&](size_t, const tp::XPlane& plane) { builder.add_plane(plane); },
      [](size_t, const podscope::xspace::XSpaceHeader&) {});
  if (!ok) return 1;
  const podscope::analysis::OpStatsResult result = std::move(builder).finish();
  if (render_tool_files(result.db) + podscope::analysis::render_op_stats_page(result).size() == 0) return 1;
  uint64_t events = 0;
  for (const auto& plane : result.planes) events += plane.events;
  return m.print(events);
}

struct Mode {
  const char* name;
  const char* label;
  int (*measure)(const fs::path&);
};

constexpr Mode kModes[] = {
    {"parse", "plain parse (baseline):", measure_parse},
    {"step-tools", "step database + its tools:", measure_step_tools},
    {"tf-data", "tf.data alone:", measure_tf_data},
    {"kernel-stats", "kernel stats alone:", measure_kernel_stats},
    {"memory-profile", "memory profile alone:", measure_memory_profile},
    {"op-stats", "op stats alone:", measure_op_stats},
    {"analyze-in-memory", "analysis, no file writes:", measure_analysis_in_memory},
    {"analyze", "analysis end to end:", measure_analysis},
};
constexpr size_t kModeCount = sizeof(kModes) / sizeof(kModes[0]);

// Events the capture memory budget dropped, summed over the annotated planes of the run's files (their stats only:
// no line is parsed).
uint64_t budget_dropped_events(const fs::path& dir) {
  uint64_t dropped = 0;
  for (const auto& f : xspace_files(dir)) {
    const absl::Status status = podscope::xspace::read_xspace_planes(
        f,
        [&](const tp::XPlane& plane) {
          if (plane.name().starts_with(podscope::xspace::kCustomPlanePrefix)) {
            dropped += static_cast<uint64_t>(
                podscope::xspace::XPlaneReader(plane).int_stat(podscope::xspace::kDroppedEventsStat).value_or(0));
          }
          return absl::OkStatus();
        },
        nullptr, [](std::string_view, std::string_view) { return false; });
    if (!status.ok()) throw std::runtime_error(std::string(status.message()));
  }
  return dropped;
}

using ModeFigures = std::array<Figures, kModeCount>;

ModeFigures report(const std::string& name, const fs::path& dir, int repeat) {
  const uint64_t bytes = input_bytes(dir);
  // Interleaved so that a slow spell of the machine hits every mode alike.
  ModeFigures figures;
  for (int i = 0; i < repeat; ++i) {
    for (size_t m = 0; m < kModeCount; ++m)
      keep_best(figures[m], run_child("analysis_bench", kModes[m].name, dir), i == 0);
  }
  const Figures& parse = figures[0];
  const double mb = static_cast<double>(bytes) / (1 << 20);
  auto heap_mb = [](const Figures& f) { return static_cast<double>(f.peak_rss_kb) / 1024; };
  const uint64_t dropped = budget_dropped_events(dir);
  std::printf("\n== %s: %.1f MiB of XSpace, %llu events, %llu dropped by the capture budget%s (best of %d runs)\n",
              name.c_str(), mb, static_cast<unsigned long long>(parse.events), static_cast<unsigned long long>(dropped),
              dropped > 0 ? ", figures per kept event (parse and analysis read the same kept events)" : "", repeat);
  for (size_t m = 0; m < kModeCount; ++m) {
    const Figures& f = figures[m];
    std::printf(
        "  %-26s %7.3f s CPU (%7.3f s wall) = %5.2fx parse  %10.0f events/s  peak %8.1f MiB = %.2fx input "
        "= %.2fx parse's\n",
        kModes[m].label, f.cpu_seconds, f.seconds, f.cpu_seconds / parse.cpu_seconds, parse.events / f.cpu_seconds,
        heap_mb(f), heap_mb(f) / mb, heap_mb(f) / heap_mb(parse));
  }
  const Figures& step_tools = figures[1];
  const Figures& in_memory = figures[kModeCount - 2];
  const Figures& end_to_end = figures[kModeCount - 1];
  uint64_t output_bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.path().filename().string().ends_with(".xplane.pb")) output_bytes += e.file_size();
  }
  std::printf(
      "  every tool but those of the step database: %.3f s CPU (%.2fx parse); file writes: %.3f s CPU\n"
      "  analysis / parse CPU time: %.2fx end to end, %.2fx without file writes (target <= 2x); analysis peak / "
      "input: %.2fx, / the parse's peak: %.2fx (target <= 1x)\n"
      "  outputs written: %.1f MiB = %.2fx input\n",
      in_memory.cpu_seconds - step_tools.cpu_seconds,
      (in_memory.cpu_seconds - step_tools.cpu_seconds) / parse.cpu_seconds,
      end_to_end.cpu_seconds - in_memory.cpu_seconds, end_to_end.cpu_seconds / parse.cpu_seconds,
      in_memory.cpu_seconds / parse.cpu_seconds, heap_mb(end_to_end) / mb, heap_mb(end_to_end) / heap_mb(parse),
      static_cast<double>(output_bytes) / (1 << 20), static_cast<double>(output_bytes) / static_cast<double>(bytes));
  return figures;
}

// k of CPU ~ events^k over the captures (least squares in log-log), per mode, and CPU per event per capture.
void report_scaling(const std::vector<std::pair<std::string, ModeFigures>>& runs) {
  if (runs.size() < 2) return;
  std::printf("\n== scaling over the real captures: CPU ~ events^k (1 = linear), and us of CPU per event\n");
  for (size_t m = 0; m < kModeCount; ++m) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    std::string per_event;
    for (const auto& [name, figures] : runs) {
      const double x = std::log(static_cast<double>(figures[0].events));
      const double y = std::log(figures[m].cpu_seconds);
      sx += x, sy += y, sxx += x * x, sxy += x * y;
      per_event += absl::StrFormat("  %s %.3f", name, 1e6 * figures[m].cpu_seconds / figures[0].events);
    }
    const double n = static_cast<double>(runs.size());
    const double k = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    std::printf("  %-26s k = %.2f; us/event:%s\n", kModes[m].label, k, per_event.c_str());
  }
}

// ---------------------------------------------------------------------------------------------------------
// Real captures of a fast trainer.

struct Process {
  pid_t pid = -1;
  // SIGTERM, then SIGKILL after 5 s.
  void stop() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 50; ++i) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
        return;
      }
      usleep(100'000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  ~Process() { stop(); }
};

// Starts `args` with stdout and stderr into `log`; it dies with the bench.
Process start_process(const std::vector<std::string>& args, const fs::path& log) {
  Process p;
  p.pid = fork();
  if (p.pid < 0) throw std::runtime_error("fork failed");
  if (p.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return p;
}

// The first match of `pattern`'s group 1 in `log`, waiting up to 20 s.
std::string wait_for_log(const fs::path& log, const std::regex& pattern) {
  for (int i = 0; i < 400; ++i) {
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    if (std::regex_search(text, m, pattern)) return m[1];
    usleep(50'000);
  }
  throw std::runtime_error("no match in " + log.string());
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// A podscope-agent and two fast ring_trainer ranks reporting to it; each capture of `seconds` lands, its host
// file alone, in `work`/real_<seconds>s. Returns those directories.
std::vector<std::pair<std::string, fs::path>> capture_fast_trainer(const fs::path& work,
                                                                   const std::vector<int>& seconds) {
  const fs::path bin = fs::path(PODSCOPE_BINARY_DIR) / "bin";
  const fs::path pod = work / "fast_trainer";
  fs::create_directories(pod);
  const fs::path socket = pod / "agent.sock";
  Process agent =
      start_process({(bin / "podscope-agent").string(), "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0",
                     "--host_name", "host0", "--socket", socket.string(), "--sample_interval_ms", "200",
                     // Kineto's endpoint in the work directory too: the default is a host-wide name.
                     "--kineto_endpoint", (pod / "dynolog").string()},
                    pod / "agent.log");
  const std::string grpc = wait_for_log(pod / "agent.log", std::regex("listening grpc=(\\S+)"));
  Process trainer =
      start_process({(bin / "ring_trainer").string(), "--spawn", "--world", "2", "--base_port",
                     std::to_string(free_port()), "--steps", "0", "--matrix", "64", "--grad_bytes", "65536",
                     "--progress_every", "1000", "--agent_sockets", socket.string() + "," + socket.string()},
                    pod / "trainer.log");
  wait_for_log(pod / "trainer.log", std::regex("(: step [0-9]+)"));  // training, a first 1000 steps done
  std::vector<std::pair<std::string, fs::path>> out;
  for (int s : seconds) {
    const fs::path logdir = pod / ("logdir_" + std::to_string(s));
    const auto start = Clock::now();
    Process capture = start_process({(bin / "podscope").string(), "capture", "--service_addr", grpc, "--logdir",
                                     logdir.string(), "--duration_ms", std::to_string(s * 1000)},
                                    pod / ("capture_" + std::to_string(s) + ".log"));
    int status = 0;
    waitpid(capture.pid, &status, 0);
    capture.pid = -1;
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("podscope capture failed");
    const fs::path dir = work / ("real_" + std::to_string(s) + "s");
    fs::create_directories(dir);
    for (const auto& run : fs::directory_iterator(logdir / "plugins" / "profile")) {
      for (const auto& f : xspace_files(run.path())) fs::copy_file(f, dir / f.filename());
    }
    std::printf("captured %d s of two fast ring_trainer ranks: `podscope capture` (analysis included) took %.1f s\n", s,
                wall);
    out.emplace_back(std::to_string(s) + " s", dir);
  }
  trainer.stop();
  agent.stop();
  return out;
}

// The work directories of earlier runs whose process is gone (killed before it could remove its own, with the
// agent's sockets in it).
void remove_stale_work_directories() {
  constexpr std::string_view kPrefix = "podscope_analysis_bench_";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::temp_directory_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kPrefix)) continue;
    const std::string pid = name.substr(kPrefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
  }
}

std::vector<int> parse_seconds(const std::string& list) {
  std::vector<int> out;
  if (list == "none") return out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--measure") == 0) {
    // Every mode, the baseline included, with the heap the CLI runs its analysis with.
    podscope::keep_freed_heap_for_reuse();
    for (const Mode& mode : kModes) {
      if (mode.name == std::string_view(argv[2])) return mode.measure(argv[3]);
    }
    std::cerr << "unknown mode " << argv[2] << "\n";
    return 2;
  }
  PodFlags flags{.events_per_core = 200'000, .repeat = 5};
  std::string tf_file, real_captures = "1,2,4";
  const bool parsed = parse_pod_flags(argc, argv, flags, [&](const std::string& flag, const FlagValueFn& value) {
    if (flag == "--tf-file") tf_file = value();
    else if (flag == "--real-captures") real_captures = value();
    else return false;
    return true;
  });
  if (!parsed) return 2;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // figures appear as they are measured
  remove_stale_work_directories();
  const fs::path work = fs::temp_directory_path() / ("podscope_analysis_bench_" + std::to_string(getpid()));
  try {
    // The captures first, while the machine is quiet, then every measurement.
    const auto captures = capture_fast_trainer(work, parse_seconds(real_captures));
    const fs::path pod = work / "pod";
    const auto start = Clock::now();
    write_synthetic_pod(pod, flags.cores, flags.events_per_core, flags.cores_per_file, /*every_tool=*/true);
    std::printf("generated %d cores x %d events in %.1f s\n", flags.cores, flags.events_per_core,
                std::chrono::duration<double>(Clock::now() - start).count());
    report("synthetic pod, " + std::to_string(flags.cores) + " cores x " + std::to_string(flags.events_per_core) +
               " events",
           pod, flags.repeat);
    std::vector<std::pair<std::string, ModeFigures>> real;
    for (const auto& [name, dir] : captures) {
      real.emplace_back(name, report("real capture, two fast ring_trainer ranks, " + name, dir, flags.repeat));
    }
    report_scaling(real);
    if (!tf_file.empty()) {
      const fs::path tf = work / "tf";
      fs::create_directories(tf);
      fs::copy_file(tf_file, tf / fs::path(tf_file).filename());
      report("file " + fs::path(tf_file).filename().string(), tf, flags.repeat);
    }
  } catch (const std::exception& e) {
    std::cerr << "analysis_bench: " << e.what() << "\n";
    if (!flags.keep) fs::remove_all(work);
    return 1;
  }
  if (!flags.keep) fs::remove_all(work);
  return 0;
}
