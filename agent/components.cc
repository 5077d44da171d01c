#include "agent/components.h"

#include "agent/capture/capture_session.h"
#include "agent/capture/host_series_source.h"
#include "agent/capture/monitor_report.h"
#include "agent/capture/pod_sessions.h"
#include "agent/capture/repository_quota.h"
#include "agent/collectors/clock_health_collector.h"
#include "agent/collectors/cpu_collector.h"
#include "agent/collectors/host_collectors.h"
#include "agent/collectors/sampler.h"
#include "agent/devices/nvml_collector.h"
#include "agent/devices/tpu_chips.h"
#include "agent/devices/tpu_metric_client.h"
#include "agent/devices/tpu_runtime_collector.h"
#include "agent/capture/upstream_source.h"
#include "agent/kineto/kineto_capture_source.h"
#include "agent/kineto/kineto_endpoint.h"
#include "agent/kineto/kineto_processes.h"
#include "agent/local/client_registry.h"
#include "agent/recorder/flight_recorder_component.h"
#include "agent/recorder/flight_recorder.h"
#include "agent/local/local_clients_source.h"
#include "agent/local/local_socket_counters.h"
#include "agent/local/local_socket_component.h"
#include "agent/local/process_collector.h"
#include "agent/recorder/triggered_snapshots.h"
#include "agent/series/series_store.h"
#include "agent/service/agent_service.h"
#include "agent/service/agent_status.h"
#include "agent/registration/coordinator_registration.h"
#include "agent/service/agent_metrics.h"
#include "agent/service/profile_analysis_service.h"
#include "agent/service/profiler_service.h"
#include "agent/steps/step_metrics.h"
#include "daemon/grpc_health_service.h"
#include "tls/credentials.h"

namespace podscope::agent {
namespace {

// --- collectors on the sampling pass ---

std::vector<std::unique_ptr<Collector>> make_host(AgentParts& parts) {
  HostCollectors host = make_host_collectors();
  parts.cpu = host.cpu;
  parts.clock_health = host.clock_health;
  return std::move(host.all);
}

std::vector<std::unique_ptr<Collector>> make_process(AgentParts& parts) {
  std::vector<std::unique_ptr<Collector>> collectors;
  collectors.push_back(std::make_unique<ProcessCollector>(parts.local_clients));
  return collectors;
}

// --- collectors on threads of their own ---
// Both device collectors always run: each reports "unavailable: <reason>" on hosts without its device.

ThreadedCollector make_tpu_runtime(AgentParts& parts) {
  auto tpu = std::make_unique<TpuRuntimeCollector>(std::make_unique<TpuMetricClient>(parts.config.tpu_metrics_addr),
                                                   discover_tpu_chips());
  parts.device_utilization.push_back(tpu.get());
  // Every second from startup: the runtime comes up with the training job.
  return {std::move(tpu), std::chrono::seconds(1)};
}

ThreadedCollector make_nvml(AgentParts& parts) {
  auto nvml = std::make_unique<NvmlCollector>();
  parts.device_utilization.push_back(nvml.get());
  return {std::move(nvml), std::chrono::milliseconds(parts.config.sample_interval_ms)};
}

// --- capture sources ---

std::unique_ptr<CaptureSource> make_local_clients_source(AgentParts& parts) {
  StepMetrics& step_metrics = *parts.step_metrics;
  return std::make_unique<LocalClientsSource>(parts.local_clients, parts.clock, [&step_metrics](const WindowDrops& d) {
    step_metrics.add_dropped_events(d.client_buffer_events);
    step_metrics.add_budget_drops(d.budget_events, d.budget_steps);
  });
}

std::unique_ptr<CaptureSource> make_upstream(AgentParts& parts) {
  std::shared_ptr<ClientRegistry> clients = parts.local_clients;
  prometheus::Counter& refused = parts.request_metrics->upstream_answers_refused;
  return std::make_unique<UpstreamSource>(
      parts.config.upstream, parts.clock, [clients] { return clients->profiler_servers(); },
      [&refused] { refused.Increment(); });
}

std::unique_ptr<CaptureSource> make_kineto_source(AgentParts& parts) {
  if (parts.config.kineto_endpoint.empty()) return nullptr;
  auto source = std::make_unique<KinetoCaptureSource>(parts.kineto_processes, parts.clock,
                                                      parts.config.kineto_trace_dir, *parts.registry, parts.host_name);
  parts.kineto_source = source.get();
  return source;
}

std::unique_ptr<CaptureSource> make_host_series(AgentParts& parts) {
  return std::make_unique<HostSeriesSource>(*parts.series, HostDescription::of_this_host(parts.host_name),
                                            parts.collectors);
}

// --- the flight recorder (a lifecycle component, made here: the services below answer from it) ---

std::unique_ptr<LifecycleComponent> make_flight_recorder(AgentParts& parts) {
  auto look_back = std::make_unique<HostSeriesSource>(*parts.series, HostDescription::of_this_host(parts.host_name),
                                                      parts.collectors);
  Sampler& sampler = *parts.sampler;
  parts.recorder = std::make_unique<FlightRecorder>(
      parts.local_clients, parts.clock, parts.host_name, std::move(look_back),
      [&sampler] { return sampler.run_pass(); }, *parts.registry);
  std::optional<FlightRecorderSettings> at_start;
  if (parts.config.flight_recorder_seconds > 0) {
    at_start = FlightRecorderSettings{parts.config.flight_recorder_seconds * 1'000'000'000,
                                      static_cast<size_t>(parts.config.flight_recorder_max_mb) << 20};
  }
  return std::make_unique<FlightRecorderComponent>(*parts.recorder, at_start);
}

// Slow steps freeze the recorder's window; made before the local socket that feeds it and the services that
// list and serve its snapshots.
std::unique_ptr<LifecycleComponent> make_triggered_snapshots(AgentParts& parts) {
  const AgentConfig& c = parts.config;
  TriggeredSnapshotSettings settings;
  settings.slow_step.factor = c.trigger_step_factor;
  settings.slow_step.spread_factor = c.trigger_spread_factor;
  settings.slow_step.min_excess_ns = static_cast<int64_t>(c.trigger_min_excess_ms * 1e6);
  settings.slow_step.min_steps = c.trigger_min_steps;
  settings.slow_step.warmup_ns = c.trigger_warmup_s * 1'000'000'000;
  settings.slow_step.cooldown_ns = c.trigger_cooldown_s * 1'000'000'000;
  // A slow step within the settling time of the last snapshot's is inside that snapshot's span.
  settings.slow_step.same_spell_ns = settings.settle_ms * 1'000'000;
  settings.max_snapshots = static_cast<size_t>(c.flight_recorder_max_snapshots);
  settings.max_memory_bytes = static_cast<size_t>(c.flight_recorder_max_mb) << 20;
  // TensorBoard's runs directory, where captures written under the root go too.
  if (!c.repository_root.empty()) {
    settings.runs_directory = std::filesystem::path(c.repository_root) / "plugins" / "profile";
  }
  settings.max_disk_bytes = static_cast<size_t>(c.flight_recorder_disk_mb) << 20;
  auto snapshots = std::make_unique<TriggeredSnapshots>(*parts.recorder, parts.local_clients, parts.clock,
                                                        parts.host_name, std::move(settings), *parts.registry);
  parts.triggered_snapshots = snapshots.get();
  return snapshots;
}

// --- gRPC services ---

std::unique_ptr<grpc::Service> make_agent_service(AgentParts& parts) {
  auto fill_status = [&parts](podscope::v1::AgentStatus& s) {
    fill_agent_status(
        {parts.host_name, parts.start_time_ns, parts.clock, parts.collectors, *parts.clock_health, *parts.captures,
         *parts.recorder, *parts.triggered_snapshots, *parts.local_clients, *parts.local_socket_counters,
         parts.kineto_endpoint, parts.kineto_source, *parts.kineto_processes},
        s);
  };
  CaptureSessions& captures = *parts.captures;
  return std::make_unique<AgentServiceImpl>(
      parts.clock, parts.host_name, parts.instance_id, std::move(fill_status),
      [&captures] { return captures.start_lead(); }, [&captures] { return captures.limits(); }, *parts.recorder,
      *parts.triggered_snapshots, *parts.request_metrics, *parts.repository_quota, *parts.authorizer);
}

std::unique_ptr<grpc::Service> make_profiler_service(AgentParts& parts) {
  Sampler& sampler = *parts.sampler;
  MonitorReporter monitor(
      *parts.captures, *parts.cpu, parts.device_utilization, [&sampler] { return sampler.run_pass(); },
      parts.step_tracker, parts.clock);
  return std::make_unique<ProfilerServiceImpl>(*parts.captures, std::move(monitor), *parts.request_metrics,
                                               parts.config.max_concurrent_monitors, *parts.recorder,
                                               *parts.authorizer);
}

std::unique_ptr<grpc::Service> make_profile_analysis_service(AgentParts& parts) {
  CaptureSessions& captures = *parts.captures;
  parts.pod_sessions = std::make_unique<PodSessions>(
      parts.clock, [&captures] { return captures.limits().repository_root; }, [&parts] { return parts.grpc_port; },
      parts.config.allowed_fanout_targets, static_cast<size_t>(parts.config.max_fanout_hosts),
      parts.config.tls.serves_tls(), parts.channel_credentials, *parts.repository_quota);
  return std::make_unique<ProfileAnalysisServiceImpl>(*parts.pod_sessions, *parts.request_metrics, *parts.authorizer);
}

std::unique_ptr<grpc::Service> make_health_service(AgentParts&) { return std::make_unique<GrpcHealthService>(); }

// --- lifecycle components ---

std::unique_ptr<LifecycleComponent> make_local_socket(AgentParts& parts) {
  LocalSocketSettings settings{parts.config.socket, parts.config.socket_group, parts.config.socket_trusted_uids,
                               parts.config.socket_limits};
  return std::make_unique<LocalSocketComponent>(
      parts.io, std::move(settings), *parts.local_clients, *parts.local_socket_counters, parts.clock,
      parts.step_tracker, *parts.step_metrics,
      [&parts](int32_t pid, const StepRecord& step) { parts.triggered_snapshots->observe_step(pid, step); });
}

std::unique_ptr<LifecycleComponent> make_kineto_endpoint(AgentParts& parts) {
  auto endpoint = std::make_unique<KinetoEndpoint>(parts.config.kineto_endpoint, parts.kineto_processes, parts.clock,
                                                   *parts.registry, parts.host_name);
  parts.kineto_endpoint = endpoint.get();
  return endpoint;
}

std::unique_ptr<LifecycleComponent> make_coordinator_registration(AgentParts& parts) {
  if (parts.config.coordinator.empty()) return nullptr;
  RegistrationSettings registration;
  registration.coordinator = parts.config.coordinator;
  registration.host_name = parts.host_name;
  registration.job = parts.config.job;
  registration.instance_id = parts.instance_id;
  registration.credentials = parts.channel_credentials;
  registration.advertised_address = [&parts] {
    return advertised_agent_address(parts.config.listen, parts.grpc_port, parts.host_name);
  };
  auto component = std::make_unique<CoordinatorRegistration>(std::move(registration));
  const int64_t cooldown_ms = parts.config.trigger_cooldown_s * 1000;
  parts.triggered_snapshots->set_reporter(
      [coordinator = component.get(), cooldown_ms](const podscope::v1::StoredSnapshot& s, int64_t window_ns) {
        podscope::v1::TriggerReport report;
        report.set_reason(s.reason());
        report.set_pid(s.pid());
        report.set_program(s.program());
        report.set_core_id(s.core_id());
        report.set_step_num(s.step_num());
        report.set_step_ns(s.step_ns());
        report.set_median_ns(s.median_ns());
        report.set_step_end_ns(s.step_end_ns());
        report.set_snapshot_id(s.id());
        report.set_window_ms(window_ns / 1'000'000);
        report.set_cooldown_ms(cooldown_ms);
        coordinator->report_trigger(std::move(report));
      });
  return component;
}

constexpr ComponentEntry kComponents[] = {
    // Collectors on the sampling pass: cheap, never blocking.
    {"host", "CPU, memory, network, disk, load average (/proc) and clock health (adjtimex) of this host", &make_host},
    {"process", "CPU time and resident memory of each annotated process (/proc/<pid>)", &make_process},
    // Collectors whose source can block, each on its own thread. Their order is Monitor's preference.
    {"tpu_runtime", "TPU duty cycle and HBM from libtpu's runtime metric service (tpu_metrics_addr)",
     &make_tpu_runtime},
    {"nvml", "NVIDIA GPUs through NVML: utilization, memory, power, clocks, PCIe and NVLink", &make_nvml},
    // Capture sources: every capture window opens, closes and gathers each of them, in this order.
    {"local_clients", "events, steps and device planes of annotated processes", &make_local_clients_source},
    {"upstream",
     "traces of framework profiler servers (TF/JAX): those listed in `upstream` and those local processes announced",
     &make_upstream},
    {"kineto", "traces of PyTorch processes polling `kineto_endpoint`, requested for the window and merged",
     &make_kineto_source},
    {"host_series", "the window's sampled series as counter tracks, host stats, collector warnings", &make_host_series},
    // The flight recorder, made before the services that answer from it.
    {"flight_recorder", "the rolling window of annotated processes' events (flight_recorder_seconds)",
     &make_flight_recorder},
    {"triggered_snapshots",
     "slow steps (trigger_step_factor × a process's median) freeze the recorder's window; kept, listed, reported",
     &make_triggered_snapshots},
    // gRPC services on `listen`.
    {"agent_service", "podscope.v1.Agent: Ping (clock sync), GetStatus, GetRecordedWindow", &make_agent_service},
    {"profiler_service",
     "tensorflow.ProfilerService: Profile, Terminate, Monitor and continuous profiling (the flight recorder)",
     &make_profiler_service},
    {"profile_analysis_service",
     "tensorflow.ProfileAnalysis: NewSession, TensorBoard's worker-list capture of `allowed_fanout_targets` hosts",
     &make_profile_analysis_service},
    {"health_service", "grpc.health.v1.Health: Check, what the loopback self-check of the port calls",
     &make_health_service},
    // Lifecycle components: started once the servers serve, stopped in reverse order.
    {"local_socket", "the Unix socket annotated processes connect to (`socket`)", &make_local_socket},
    {"kineto_endpoint", "dynolog's IPC fabric endpoint PyTorch's Kineto polls (`kineto_endpoint`)",
     &make_kineto_endpoint},
    {"coordinator_registration", "registration and heartbeats with podscope-coordinator (`coordinator`)",
     &make_coordinator_registration},
};

}  // namespace

AgentParts::AgentParts(const AgentConfig& config)
    : config(config),
      host_name(effective_host_name(config)),
      instance_id(new_instance_id()),
      clock(config.clock_offset_ns),
      start_time_ns(clock.now_ns()),
      registry(std::make_shared<prometheus::Registry>()),
      series(std::make_unique<SeriesStore>(
          *registry, host_name, SeriesStore::capacity_for(config.max_duration_ms, config.sample_interval_ms))),
      sampler(std::make_unique<Sampler>(io, clock, *series, *registry, host_name,
                                        std::chrono::milliseconds(config.sample_interval_ms))),
      request_metrics(std::make_unique<RequestMetrics>(*registry, host_name)),
      repository_quota(
          std::make_unique<RepositoryQuota>(static_cast<size_t>(config.repository_quota_mb) << 20,
                                            [this] { request_metrics->repository_writes_refused.Increment(); })),
      captures(std::make_unique<CaptureSessions>(
          clock, host_name, [this] { return sampler->run_pass(); }, *repository_quota)),
      local_clients(std::make_shared<ClientRegistry>()),
      local_socket_counters(std::make_unique<LocalSocketCounters>(*registry, host_name)),
      step_metrics(std::make_unique<StepMetrics>(*registry, host_name)),
      kineto_processes(std::make_shared<KinetoProcesses>()),
      channel_credentials(tls::channel_credentials(config.tls)),
      authorizer(
          std::make_unique<tls::CallAuthorizer>(config.tls, *registry, prometheus::Labels{{"host", host_name}})) {
  register_build_info(*registry, host_name, PODSCOPE_VERSION);
  captures->set_limits(capture_limits(config));
}

CaptureLimits capture_limits(const AgentConfig& config) {
  return {config.max_duration_ms, config.repository_root, static_cast<size_t>(config.capture_memory_limit_mb) << 20,
          config.allowed_repository_roots, config.failed_uploads_directory};
}

AgentParts::~AgentParts() = default;

std::span<const ComponentEntry> agent_components() { return kComponents; }

}  // namespace podscope::agent
