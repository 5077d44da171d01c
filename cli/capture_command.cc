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
#include "cli/coordinator_client.h"
#include "cli/terminal_text.h"
#include "cli/terminate_on_interrupt.h"
#include "pod_capture/monitor.h"
#include "pod_capture/pod_run.h"
#include "pod_capture/remote_capture.h"
#include "run_directory/run_directory.h"
#include "storage/location.h"
#include "podscope/v1/coordinator.grpc.pb.h"
#include "tls/credentials.h"

namespace podscope::cli {
namespace {

constexpr int kUsageError = 2;

int usage_error(const std::string& reason) {
  print(std::cerr, "podscope capture: " + reason + "\n");
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
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
  absl::StatusOr<podscope::v1::ListWorkersResponse> response =
      list_workers(flags.coordinator, flags.tls, std::chrono::seconds(10));
  if (!response.ok()) return response.status();
  const std::vector<std::string> wanted = absl::StrSplit(flags.workers_list, ',', absl::SkipWhitespace());
  std::vector<std::string> out;
  for (const auto& worker : response->workers()) {
    const bool named = wanted.empty() || std::find(wanted.begin(), wanted.end(), worker.host_name()) != wanted.end();
    if (worker.up() && named) out.push_back(worker.address());
  }
  if (out.empty()) {
    return absl::FailedPreconditionError("coordinator " + pod_capture::strip_grpc_scheme(flags.coordinator) +
                                         " lists no matching worker that is up");
  }
  return out;
}

// The flags' capture in podscope.v1 terms: sent to a coordinator as it is, or turned into the spec of a
// capture this process fans out (pod_capture::capture_spec_from, where defaults are applied).
podscope::v1::CaptureRequest capture_request_from(const CaptureFlags& flags) {
  podscope::v1::CaptureRequest request;
  // A coordinator selects by these names; this process finds its agents through target_addresses instead.
  for (absl::string_view host : absl::StrSplit(flags.workers_list, ',', absl::SkipWhitespace())) {
    request.add_hosts(std::string(host));
  }
  request.set_duration_ms(static_cast<uint64_t>(std::max<int64_t>(0, flags.duration_ms)));
  request.set_num_tracing_attempts(flags.num_tracing_attempts);
  request.set_delay_ms(static_cast<uint64_t>(flags.delay_ms));
  request.set_include_dataset_ops(flags.include_dataset_ops);
  request.set_host_tracer_level(static_cast<uint32_t>(flags.host_tracer_level));
  request.set_device_tracer_level(static_cast<uint32_t>(flags.device_tracer_level));
  request.set_python_tracer_level(static_cast<uint32_t>(flags.python_tracer_level));
  request.set_last_ms(static_cast<uint64_t>(flags.last_ms));
  if (storage::is_bucket_url(flags.logdir)) request.set_logdir(flags.logdir);
  return request;
}

// Why the flags cannot run, or empty.
std::string usage_problem(const CaptureFlags& flags) {
  if (absl::Status bad = tls::check_tls_config(flags.tls); !bad.ok()) return std::string(bad.message());
  if (absl::Status bad = tls::check_tls_files(flags.tls); !bad.ok()) return std::string(bad.message());
  if (flags.num_tracing_attempts < 1) {
    return "--num_tracing_attempts must be >= 1, got " + std::to_string(flags.num_tracing_attempts);
  }
  if (!flags.coordinator.empty() && !flags.service_addr.empty()) {
    return "give either --service_addr or --coordinator, not both";
  }
  if (flags.coordinator.empty() && flags.service_addr.empty()) return "--service_addr (or --coordinator) is required";
  if (flags.monitoring_level == 0 && flags.logdir.empty()) return "--logdir is required to capture";
  return "";
}

pod_capture::ProgressFn progress_printer(bool quiet) {
  return [quiet](const std::string& line) {
    if (!quiet) print(std::cout, line + "\n") << std::flush;
  };
}

int print_outcome(const std::string& summary_text, const std::string& run_location, int exit_code) {
  print(std::cout, summary_text + "Run directory: " + run_location + "\n");
  return exit_code;
}

// The run `run_name` in --logdir: a local directory, or a bucket prefix (gs://, s3://) whose store is opened with the
// credentials found for it.
absl::StatusOr<run_directory::RunDirectory> run_in_logdir(const std::string& logdir, const std::string& run_name) {
  if (!storage::is_bucket_url(logdir)) return run_directory::RunDirectory::in_logdir(logdir, run_name);
  std::string root = logdir;
  while (root.ends_with('/')) root.pop_back();
  return run_directory::RunDirectory::open(root + "/plugins/profile/" + run_name);
}

struct Agents {
  std::vector<std::unique_ptr<pod_capture::AgentConnection>> connections;
  std::vector<pod_capture::AgentConnection*> pointers;
};

Agents connect_agents(const std::vector<std::string>& addresses, const tls::TlsConfig& tls) {
  Agents agents;
  const std::shared_ptr<grpc::ChannelCredentials> credentials = tls::channel_credentials(tls);
  for (const auto& address : addresses) {
    agents.connections.push_back(pod_capture::connect_agent(address, credentials));
    agents.pointers.push_back(agents.connections.back().get());
  }
  return agents;
}

// --monitoring_level 1|2, straight to the agents (through a coordinator: to the workers it lists as up).
int run_monitoring(const CaptureFlags& flags, int64_t duration_ms) {
  auto addresses = flags.coordinator.empty() ? target_addresses(flags) : workers_of_coordinator(flags);
  if (!addresses.ok()) {
    if (flags.coordinator.empty()) return usage_error(std::string(addresses.status().message()));
    print(std::cerr, "podscope capture: " + std::string(addresses.status().message()) + "\n");
    return 1;
  }
  const Agents agents = connect_agents(*addresses, flags.tls);
  const auto names = pod_capture::worker_names(agents.pointers);
  for (int sample = 1; sample <= flags.num_queries; ++sample) {
    const auto results = pod_capture::monitor_round(agents.pointers, names, duration_ms, flags.monitoring_level,
                                                    flags.display_timestamp);
    print(std::cout, pod_capture::format_monitor_round(sample, results) + "\n") << std::flush;
  }
  return 0;
}

// The pod run fanned out by this process: Ctrl-C ends the agents' captures early and the run is written as usual.
int capture_from_agents(const CaptureFlags& flags, pod_capture::CaptureSpec spec) {
  auto addresses = target_addresses(flags);
  if (!addresses.ok()) return usage_error(std::string(addresses.status().message()));
  const Agents agents = connect_agents(*addresses, flags.tls);
  std::vector<pod_capture::PodAgent> pod;
  for (auto* connection : agents.pointers) pod.emplace_back().connection = connection;  // nothing else is known
  absl::StatusOr<run_directory::RunDirectory> run = run_in_logdir(flags.logdir, spec.session_id);
  if (!run.ok()) {
    print(std::cerr, "podscope capture: " + std::string(run.status().message()) + "\n");
    return 1;
  }
  absl::StatusOr<pod_capture::PodRunOutcome> outcome;
  {
    TerminateOnInterrupt interrupt(agents.pointers, spec.session_id);
    spec.stop_retrying = [&interrupt] { return interrupt.interrupted(); };
    ProgressBar bar(spec.last_ms > 0 ? 0 : spec.duration_ms, !flags.quiet);
    outcome = pod_capture::run_pod(pod, spec, *run, Clock(), progress_printer(flags.quiet));
  }
  if (!outcome.ok()) {
    print(std::cerr, "podscope capture: " + std::string(outcome.status().message()) + "\n");
    return 1;
  }
  return print_outcome(outcome->summary_text, outcome->run_location, outcome->exit_code());
}

int capture_through_coordinator(const CaptureFlags& flags, const podscope::v1::CaptureRequest& request,
                                int64_t duration_ms) {
  ProgressBar bar(duration_ms, !flags.quiet);
  auto outcome = pod_capture::capture_through_coordinator(pod_capture::strip_grpc_scheme(flags.coordinator),
                                                          tls::channel_credentials(flags.tls), request, flags.logdir,
                                                          progress_printer(flags.quiet));
  if (!outcome.ok()) {
    print(std::cerr, "podscope capture: " + std::string(outcome.status().message()) + "\n");
    return 1;
  }
  return print_outcome(outcome->summary_text, outcome->run_location, outcome->exit_code);
}

// A boolean flag as absl parses it: `--name`, `--noname`, `--name=true|false` (also 1|0); the default is in
// the description because CLI11 would show the negated form's value.
void add_absl_boolean(CLI::App& command, const std::string& name, bool& value, const std::string& description) {
  command.add_flag("--" + name + ",!--no" + name, value, description + " (default " + (value ? "true" : "false") + ")");
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
  command
      .add_option("--duration_ms", f.duration_ms,
                  "Capture duration; <= 0 means " + std::to_string(pod_capture::kDefaultCaptureDurationMs))
      ->capture_default_str();
  command
      .add_option("--last_ms", f.last_ms,
                  "Capture the past instead: the last N ms each agent's flight recorder holds "
                  "(agents started with --flight_recorder_seconds), now, the same span of merged time on every agent")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--num_tracing_attempts", f.num_tracing_attempts, "Attempts when a capture fails or is empty")
      ->capture_default_str();
  add_absl_boolean(command, "include_dataset_ops", f.include_dataset_ops, "Trace tf.data ops");
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
  command.add_option("--num_queries", f.num_queries, "Monitoring rounds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_absl_boolean(command, "display_timestamp", f.display_timestamp, "Timestamps in monitoring output");
  add_absl_boolean(command, "quiet", f.quiet, "Print only the outcome");
  tls::add_tls_flags(command, f.tls);
  command.footer(
      "capture_tpu_profile's flags are accepted with its defaults and syntax, except the Cloud TPU ones: --tpu, "
      "--tpu_zone and --gcp_project (name the workers with --service_addr or --coordinator instead).");
}

int run_capture_command(const CaptureFlags& flags) {
  if (const std::string problem = usage_problem(flags); !problem.empty()) return usage_error(problem);
  const podscope::v1::CaptureRequest request = capture_request_from(flags);
  const pod_capture::CaptureSpec spec = pod_capture::capture_spec_from(request, /*session_id=*/"", Clock().now_ns());
  if (flags.monitoring_level > 0) return run_monitoring(flags, spec.duration_ms);
  if (!flags.coordinator.empty()) {
    return capture_through_coordinator(flags, request, spec.last_ms > 0 ? 0 : spec.duration_ms);
  }
  return capture_from_agents(flags, spec);
}

}  // namespace podscope::cli
