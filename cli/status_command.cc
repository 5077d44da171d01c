#include "cli/status_command.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli/coordinator_client.h"
#include "pod_capture/agent_connection.h"
#include "podscope/v1/coordinator.grpc.pb.h"
#include "tls/credentials.h"

namespace podscope::cli {
namespace {

// "off", or the window, what it holds against its cap and what the cap dropped.
std::string flight_recorder_summary(const podscope::v1::FlightRecorderStatus& r) {
  if (!r.on()) return "off (flight_recorder_seconds=0)";
  std::string out = "on, window " + std::to_string(r.window_ms() / 1000) + " s, holding " +
                    std::to_string(r.held_events()) + " events in " + std::to_string(r.held_bytes() >> 20) + " of " +
                    std::to_string(r.max_bytes() >> 20) + " MiB";
  if (r.dropped_events() > 0) out += ", dropped " + std::to_string(r.dropped_events()) + " events at the cap";
  for (const podscope::v1::RecordedProcess& p : r.processes()) {
    char held[160];
    std::snprintf(held, sizeof held, "; pid %d (%s): %.1f s held, %llu events", p.pid(), p.program().c_str(),
                  p.held_seconds(), static_cast<unsigned long long>(p.held_events()));
    out += held;
  }
  out += "; " + std::to_string(r.snapshots_size()) + " stored snapshot(s) (" + std::to_string(r.snapshots_triggered()) +
         " triggered, " + std::to_string(r.snapshots_deleted()) + " deleted)";
  return out;
}

// One line per stored snapshot: its id, what froze it and where it is kept.
std::string stored_snapshot_line(const podscope::v1::StoredSnapshot& s) {
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.1fx", s.median_ns() > 0 ? static_cast<double>(s.step_ns()) / s.median_ns() : 0);
  std::string out = "    snapshot " + s.id() + ": " + s.reason() + ", pid " + std::to_string(s.pid()) + " (" +
                    s.program() + ") core " + std::to_string(s.core_id()) + " step " + std::to_string(s.step_num()) +
                    " " + ratio + " its median, " + std::to_string((s.end_ns() - s.start_ns()) / 1'000'000) +
                    " ms held, " + std::to_string(s.bytes() >> 10) + " KiB";
  if (!s.path().empty()) out += ", " + s.path();
  return out;
}

std::string ms(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

const char* state_name(podscope::v1::CollectorStatus::State state) {
  switch (state) {
    case podscope::v1::CollectorStatus::OK: return "ok";
    case podscope::v1::CollectorStatus::DEGRADED: return "degraded";
    case podscope::v1::CollectorStatus::UNAVAILABLE: return "unavailable";
    default: return "unknown";
  }
}

// ", 3 connections open (1 registered); refused: 12 uid_cap, 2 idle_timeout" (refusal reasons that happened).
std::string local_socket_summary(const podscope::v1::LocalSocketCounts& socket) {
  std::string out = ", " + std::to_string(socket.connections()) + " connection(s) open (" +
                    std::to_string(socket.registered()) + " registered)";
  std::string refused;
  for (const auto& r : socket.refused()) {
    if (r.count() > 0) refused += (refused.empty() ? "" : ", ") + std::to_string(r.count()) + " " + r.reason();
  }
  return out + "; refused: " + (refused.empty() ? "none" : refused);
}

// "PyTorch (Kineto): serving abstract socket @dynolog, 2 process(es) polling; refused: 3 short; traces merged 4,
// refused: 1 symlink" and a line per process: "    pid 812 uid 1000 job 0 (ancestors 790,1), polled 1.2 s ago
// every 5.0 s".
void print_kineto(const podscope::v1::KinetoStatus& kineto, int64_t now_ns) {
  std::cout << "  PyTorch (Kineto): ";
  if (kineto.state() != podscope::v1::KinetoStatus::SERVING) {
    std::cout << (kineto.detail().empty() ? "off" : kineto.detail()) << "\n";
    return;
  }
  std::string refused;
  for (const auto& r : kineto.refused()) {
    if (r.count() > 0) refused += (refused.empty() ? "" : ", ") + std::to_string(r.count()) + " " + r.reason();
  }
  std::string traces_refused;
  for (const auto& r : kineto.traces_refused()) {
    if (r.count() > 0) {
      traces_refused += (traces_refused.empty() ? "" : ", ") + std::to_string(r.count()) + " " + r.reason();
    }
  }
  std::cout << kineto.detail() << ", " << kineto.processes_size()
            << " process(es) polling; refused: " << (refused.empty() ? "none" : refused) << "; traces merged "
            << kineto.traces_merged() << ", refused: " << (traces_refused.empty() ? "none" : traces_refused) << "\n";
  for (const auto& p : kineto.processes()) {
    std::cout << "    pid " << p.pid() << " uid " << p.uid() << " job " << p.job_id();
    if (p.ancestors_size() > 0) {
      std::cout << " (ancestors";
      for (int i = 0; i < p.ancestors_size(); ++i) std::cout << (i == 0 ? " " : ",") << p.ancestors(i);
      std::cout << ")";
    }
    if (p.gpu() >= 0) std::cout << " gpu " << p.gpu();
    std::cout << ", polled " << ms(now_ns - p.last_poll_ns()) << " ago";
    if (p.poll_interval_ms() > 0) std::cout << ", every " << p.poll_interval_ms() << " ms";
    std::cout << "\n";
  }
}

int status_from_agents(const std::string& list, const tls::TlsConfig& tls) {
  auto addresses = pod_capture::parse_service_addresses(list);
  if (!addresses.ok()) {
    std::cerr << "podscope status: " << addresses.status().message() << "\n";
    return 2;
  }
  int failures = 0;
  const std::shared_ptr<grpc::ChannelCredentials> credentials = tls::channel_credentials(tls);
  for (const auto& address : *addresses) {
    auto agent = pod_capture::connect_agent(address, credentials);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    podscope::v1::AgentStatus status;
    const grpc::Status rpc = agent->agent->GetStatus(&context, podscope::v1::StatusRequest(), &status);
    if (!rpc.ok()) {
      std::cout << address << ": unreachable (" << rpc.error_message() << ")\n";
      ++failures;
      continue;
    }
    const auto clock = pod_capture::measure_clock(*agent, Clock(), 16, 1000);
    std::cout << address << ": " << status.host_name() << " (podscope-agent " << status.version() << ")";
    if (!status.capture_session_id().empty()) std::cout << ", capturing " << status.capture_session_id();
    std::cout << "\n  clock: ";
    if (clock.kind == pod_capture::ClockMeasurement::kMeasured) {
      std::cout << "offset " << ms(clock.estimate.offset_ns) << " ± " << ms(clock.estimate.error_bound_ns) << ", rtt "
                << ms(clock.estimate.rtt_ns);
    } else {
      std::cout << clock.detail;
    }
    std::cout << "; host clock " << (status.clock_synchronized() ? "synchronized" : "NOT synchronized");
    if (!status.clock_detail().empty()) std::cout << " (" << status.clock_detail() << ")";
    std::cout << "\n  collectors:\n";
    for (const auto& c : status.collectors()) {
      std::cout << "    " << c.name() << ": " << state_name(c.state());
      if (!c.reason().empty()) std::cout << " — " << c.reason();
      std::cout << "\n";
    }
    std::cout << "  flight recorder: " << flight_recorder_summary(status.flight_recorder()) << "\n";
    for (const auto& snapshot : status.flight_recorder().snapshots()) {
      std::cout << stored_snapshot_line(snapshot) << "\n";
    }
    std::cout << "  local clients: " << status.clients_size() << local_socket_summary(status.local_socket()) << "\n";
    for (const auto& client : status.clients()) {
      std::cout << "    pid " << client.pid() << " " << client.program();
      if (!client.job().empty()) std::cout << " job " << client.job();
      if (client.dropped_events() > 0) std::cout << ", dropped " << client.dropped_events() << " events";
      if (client.profiler_port() > 0)
        std::cout << ", profiler server 127.0.0.1:" << client.profiler_port() << " proxied";
      std::cout << "\n";
    }
    print_kineto(status.kineto(), status.now_ns());
  }
  return failures == 0 ? 0 : (failures == static_cast<int>(addresses->size()) ? 1 : 3);
}

int status_from_coordinator(const std::string& given_address, const tls::TlsConfig& tls) {
  absl::StatusOr<podscope::v1::ListWorkersResponse> response =
      list_workers(given_address, tls, std::chrono::seconds(5));
  if (!response.ok()) {
    std::cerr << "podscope status: " << response.status().message() << "\n";
    return 1;
  }
  std::cout << response->workers_size() << " worker(s) known to " << pod_capture::strip_grpc_scheme(given_address)
            << "\n";
  for (const auto& w : response->workers()) {
    std::cout << "  " << w.host_name() << " " << w.address() << " " << (w.up() ? "up" : "DOWN");
    if (!w.job().empty()) std::cout << " job " << w.job();
    if (w.clock_rtt_ns() > 0) {
      std::cout << ", clock offset " << ms(w.clock_offset_ns()) << ", rtt " << ms(w.clock_rtt_ns());
    } else {
      std::cout << ", clock not measured yet";
    }
    if (w.clock_drift_ppm() != 0) std::cout << ", drift " << w.clock_drift_ppm() << " ppm";
    std::cout << (w.static_worker() ? " (static)" : "") << "\n";
  }
  return 0;
}

}  // namespace

void add_status_flags(CLI::App& command, StatusFlags& flags) {
  command.add_option("--service_addr", flags.service_addr, "Comma-separated host:port of agents to ask");
  command.add_option("--coordinator", flags.coordinator, "Ask this podscope-coordinator for its workers");
  tls::add_tls_flags(command, flags.tls);
}

int run_status_command(const StatusFlags& flags) {
  if (flags.service_addr.empty() == flags.coordinator.empty()) {
    std::cerr << "podscope status: give exactly one of --service_addr or --coordinator\n";
    return 2;
  }
  absl::Status bad = tls::check_tls_config(flags.tls);
  if (bad.ok()) bad = tls::check_tls_files(flags.tls);
  if (!bad.ok()) {
    std::cerr << "podscope status: " << bad.message() << "\n";
    return 2;
  }
  return flags.coordinator.empty() ? status_from_agents(flags.service_addr, flags.tls)
                                   : status_from_coordinator(flags.coordinator, flags.tls);
}

}  // namespace podscope::cli
