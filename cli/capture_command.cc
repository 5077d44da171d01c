#include "cli/capture_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/terminate_on_interrupt.h"
#include "analysis/runner/analysis_runner.h"
#include "pod_capture/capture.h"
#include "pod_capture/monitor.h"
#include "pod_capture/remote_capture.h"
#include "pod_capture/run_directory.h"
#include "podscope/v1/coordinator.grpc.pb.h"

namespace podscope::cli {
namespace {

constexpr int kUsageError = 2;

int usage_error(const std::string& reason) {
  std::cerr << "podscope capture: " << reason << "\n";
  return kUsageError;
}

// A progress bar on stderr while a long capture runs; only on a terminal and without --quiet.
class ProgressBar {
 public:
  ProgressBar(int64_t duration_ms, bool enabled) {
    if (!enabled || duration_ms < 2000 || !isatty(STDERR_FILENO)) return;
    thread_ = std::thread([this, duration_ms] {
      const auto start = std::chrono::steady_clock::now();
      std::unique_lock lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return done_; })) {
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double total = static_cast<double>(duration_ms) / 1000.0;
        const int filled = static_cast<int>(30 * std::min(1.0, elapsed / total));
        std::fprintf(stderr, "\r[%-30s] %5.1f / %.1f s", std::string(filled, '#').c_str(), std::min(elapsed, total),
                     total);
      }
      std::fprintf(stderr, "\r%50s\r", "");
    });
  }
  ~ProgressBar() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// --workers_list names hosts; those without a port get --service_addr's port, as TF's NewSession does.
absl::StatusOr<std::vector<std::string>> target_addresses(const CaptureFlags& flags) {
  auto service = pod_capture::parse_service_addresses(flags.service_addr);
  if (!service.ok()) return service.status();
  if (flags.workers_list.empty()) return service;
  const std::string port = service->front().substr(service->front().rfind(':') + 1);
  std::vector<std::string> out;
  for (absl::string_view worker : absl::StrSplit(flags.workers_list, ',', absl::SkipWhitespace())) {
    std::string address(worker);
    if (address.find(':') == std::string::npos) address += ":" + port;
    out.push_back(address);
  }
  return pod_capture::parse_service_addresses(absl::StrJoin(out, ","));
}

// The up workers a coordinator lists (all, or those named in --workers_list).
absl::StatusOr<std::vector<std::string>> workers_of_coordinator(const CaptureFlags& flags) {
  std::string address = flags.coordinator;
  if (address.rfind("grpc://", 0) == 0) address.erase(0, 7);
  auto stub = podscope::v1::Coordinator::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  podscope::v1::ListWorkersResponse response;
  const grpc::Status status = stub->ListWorkers(&context, podscope::v1::ListWorkersRequest(), &response);
  if (!status.ok()) {
    return absl::UnavailableError("coordinator " + address + " unreachable: " + status.error_message());
  }
  const std::vector<std::string> wanted = absl::StrSplit(flags.workers_list, ',', absl::SkipWhitespace());
  std::vector<std::string> out;
  for (const auto& worker : response.workers()) {
    const bool named = wanted.empty() || std::find(wanted.begin(), wanted.end(), worker.host_name()) != wanted.end();
    if (worker.up() && named) out.push_back(worker.address());
  }
  if (out.empty()) return absl::FailedPreconditionError("coordinator " + address + " lists no matching worker that is up");
  return out;
}

int run_monitoring(const CaptureFlags& flags, const std::vector<pod_capture::AgentConnection*>& agents) {
  const auto names = pod_capture::worker_names(agents);
  for (int sample = 1; sample <= flags.num_queries; ++sample) {
    const auto results = pod_capture::monitor_round(agents, names, flags.duration_ms, flags.monitoring_level,
                                                    flags.display_timestamp);
    std::cout << pod_capture::format_monitor_round(sample, results) << "\n" << std::flush;
  }
  return 0;
}

// The pod analysis of a fresh run; a failed analysis is a warning, the capture itself succeeded.
void print_pod_analysis(const std::filesystem::path& run_dir) {
  auto outcome = analysis::analyze_run_directory(run_dir);
  if (!outcome.ok()) {
    std::cerr << "podscope capture: pod analysis failed: " << outcome.status().message() << "\n";
    return;
  }
  std::cout << "\n" << outcome->summary_text;
}

pod_capture::ProgressFn progress_printer(bool quiet) {
  return [quiet](const std::string& line) {
    if (!quiet) std::cout << line << "\n" << std::flush;
  };
}

int capture_through_coordinator(const CaptureFlags& flags) {
  podscope::v1::CaptureRequest request;
  for (absl::string_view host : absl::StrSplit(flags.workers_list, ',', absl::SkipWhitespace())) {
    request.add_hosts(std::string(host));
  }
  request.set_duration_ms(static_cast<uint64_t>(flags.duration_ms));
  request.set_num_tracing_attempts(flags.num_tracing_attempts);
  request.set_delay_ms(static_cast<uint64_t>(flags.delay_ms));
  request.set_include_dataset_ops(flags.include_dataset_ops);
  request.set_host_tracer_level(static_cast<uint32_t>(flags.host_tracer_level));
  request.set_device_tracer_level(static_cast<uint32_t>(flags.device_tracer_level));
  request.set_python_tracer_level(static_cast<uint32_t>(flags.python_tracer_level));
  std::string coordinator_address = flags.coordinator;
  if (coordinator_address.rfind("grpc://", 0) == 0) coordinator_address.erase(0, 7);
  ProgressBar bar(flags.duration_ms, !flags.quiet);
  auto outcome =
      pod_capture::capture_through_coordinator(coordinator_address, request, flags.logdir, progress_printer(flags.quiet));
  if (!outcome.ok()) {
    std::cerr << "podscope capture: " << outcome.status().message() << "\n";
    return 1;
  }
  std::cout << outcome->summary_text;
  std::cout << "Run directory: " << outcome->run_dir.string() << "\n";
  return outcome->exit_code;
}

}  // namespace

void add_capture_flags(CLI::App& command, CaptureFlags& f) {
  command.add_option("--service_addr", f.service_addr,
                     "Comma-separated host:port of the profiler services to capture (a grpc:// prefix is stripped)");
  command.add_option("--workers_list", f.workers_list,
                     "Comma-separated worker hosts; without a port they get --service_addr's port. With "
                     "--coordinator: the host names to capture");
  command.add_option("--coordinator", f.coordinator, "Capture through this podscope-coordinator (host:port)");
  command.add_option("--logdir", f.logdir, "TensorBoard log directory the run is written under");
  command.add_option("--duration_ms", f.duration_ms, "Capture duration; <= 0 means 1000")->capture_default_str();
  command.add_option("--num_tracing_attempts", f.num_tracing_attempts, "Attempts when a capture fails or is empty")
      ->capture_default_str();
  command.add_option("--include_dataset_ops", f.include_dataset_ops, "Trace tf.data ops")->capture_default_str();
  command.add_option("--host_tracer_level", f.host_tracer_level, "Host trace level (0 off, 1-3)")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();
  command.add_option("--device_tracer_level", f.device_tracer_level, "Device trace level (0 off, 1 on)")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  command.add_option("--python_tracer_level", f.python_tracer_level, "Python trace level (0 off, 1 on)")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  command.add_option("--delay_ms", f.delay_ms, "Delay before the capture starts")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command.add_option("--monitoring_level", f.monitoring_level, "0: capture; 1 or 2: only monitor")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  command.add_option("--num_queries", f.num_queries, "Monitoring rounds")->check(CLI::PositiveNumber)->capture_default_str();
  command.add_option("--display_timestamp", f.display_timestamp, "Timestamps in monitoring output")
      ->capture_default_str();
  command.add_flag("--quiet", f.quiet, "Print only the outcome");
}

int run_capture_command(const CaptureFlags& given) {
  CaptureFlags flags = given;
  if (flags.duration_ms <= 0) flags.duration_ms = 1000;
  if (flags.num_tracing_attempts < 1) return usage_error("--num_tracing_attempts must be >= 1, got " + std::to_string(flags.num_tracing_attempts));
  const bool monitoring = flags.monitoring_level > 0;
  if (!flags.coordinator.empty() && !flags.service_addr.empty()) {
    return usage_error("give either --service_addr or --coordinator, not both");
  }
  if (flags.coordinator.empty() && flags.service_addr.empty()) {
    return usage_error("--service_addr (or --coordinator) is required");
  }
  if (!monitoring && flags.logdir.empty()) return usage_error("--logdir is required to capture");
  if (!flags.coordinator.empty() && !monitoring) return capture_through_coordinator(flags);
  // Monitoring through a coordinator goes straight to the workers it lists as up.
  auto addresses = flags.coordinator.empty() ? target_addresses(flags) : workers_of_coordinator(flags);
  if (!addresses.ok()) {
    if (flags.coordinator.empty()) return usage_error(std::string(addresses.status().message()));
    std::cerr << "podscope capture: " << addresses.status().message() << "\n";
    return 1;
  }

  std::vector<std::unique_ptr<pod_capture::AgentConnection>> connections;
  std::vector<pod_capture::AgentConnection*> agents;
  for (const auto& address : *addresses) {
    connections.push_back(pod_capture::connect_agent(address));
    agents.push_back(connections.back().get());
  }
  if (monitoring) return run_monitoring(flags, agents);

  pod_capture::CaptureSpec spec;
  spec.duration_ms = flags.duration_ms;
  spec.num_tracing_attempts = flags.num_tracing_attempts;
  spec.delay_ms = flags.delay_ms;
  spec.include_dataset_ops = flags.include_dataset_ops;
  spec.host_tracer_level = static_cast<uint32_t>(flags.host_tracer_level);
  spec.device_tracer_level = static_cast<uint32_t>(flags.device_tracer_level);
  spec.python_tracer_level = static_cast<uint32_t>(flags.python_tracer_level);
  spec.session_id = pod_capture::make_session_id(Clock().now_ns());
  pod_capture::CaptureResult result;
  {
    TerminateOnInterrupt interrupt(agents, spec.session_id);
    spec.stop_retrying = [&interrupt] { return interrupt.interrupted(); };
    ProgressBar bar(flags.duration_ms, !flags.quiet);
    result = pod_capture::run_capture(agents, spec, Clock(), progress_printer(flags.quiet));
  }
  auto run_dir = pod_capture::write_run_directory(flags.logdir, result);
  if (!run_dir.ok()) {
    std::cerr << "podscope capture: " << run_dir.status().message() << "\n";
    return 1;
  }
  std::cout << pod_capture::capture_summary_text(result, *run_dir);
  if (result.exit_code() != 1) print_pod_analysis(*run_dir);
  return result.exit_code();
}

}  // namespace podscope::cli
