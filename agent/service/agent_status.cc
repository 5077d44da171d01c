#include "agent/service/agent_status.h"

#include "agent/capture/capture_session.h"
#include "agent/collectors/clock_health_collector.h"
#include "agent/kineto/kineto_capture_source.h"
#include "agent/kineto/kineto_endpoint.h"
#include "agent/kineto/kineto_processes.h"
#include "agent/local/client_registry.h"
#include "agent/local/local_socket_counters.h"
#include "agent/recorder/flight_recorder.h"
#include "agent/recorder/triggered_snapshots.h"

namespace podscope::agent {
namespace {

podscope::v1::CollectorStatus::State to_proto(CollectorState::State s) {
  switch (s) {
    case CollectorState::State::kOk: return podscope::v1::CollectorStatus::OK;
    case CollectorState::State::kDegraded: return podscope::v1::CollectorStatus::DEGRADED;
    case CollectorState::State::kUnavailable: return podscope::v1::CollectorStatus::UNAVAILABLE;
  }
  return podscope::v1::CollectorStatus::UNKNOWN;
}

void fill_flight_recorder_status(const AgentStatusSources& sources, podscope::v1::FlightRecorderStatus& out) {
  // Stored snapshots outlive a StopContinuousProfiling.
  for (podscope::v1::StoredSnapshot& snapshot : sources.triggered_snapshots.list()) {
    *out.add_snapshots() = std::move(snapshot);
  }
  out.set_snapshots_triggered(sources.triggered_snapshots.triggered());
  out.set_snapshots_deleted(sources.triggered_snapshots.deleted());
  const std::optional<FlightRecorderState> state = sources.recorder.state();
  if (!state) return;
  out.set_on(true);
  out.set_window_ms(state->window_ns / 1'000'000);
  out.set_max_bytes(state->max_bytes);
  out.set_held_bytes(state->held_bytes);
  out.set_held_events(state->held_events);
  out.set_dropped_events(state->dropped_events);
  if (state->oldest_ns != 0) out.set_oldest_event_ns(sources.clock.from_system_ns(state->oldest_ns));
  for (const RecordedClient& c : state->clients) {
    podscope::v1::RecordedProcess* p = out.add_processes();
    p->set_pid(c.client.pid);
    p->set_program(c.client.program);
    p->set_held_seconds(state->held_seconds(c));
    p->set_held_events(c.events);
  }
}

void fill_kineto_status(const AgentStatusSources& sources, podscope::v1::KinetoStatus& out) {
  if (sources.kineto_endpoint == nullptr) return;
  const KinetoEndpointStatus endpoint = sources.kineto_endpoint->status();
  out.set_endpoint(endpoint.endpoint);
  switch (endpoint.state) {
    case KinetoEndpointStatus::State::kOff: out.set_state(podscope::v1::KinetoStatus::OFF); break;
    case KinetoEndpointStatus::State::kServing: out.set_state(podscope::v1::KinetoStatus::SERVING); break;
    case KinetoEndpointStatus::State::kUnavailable: out.set_state(podscope::v1::KinetoStatus::UNAVAILABLE); break;
  }
  out.set_detail(endpoint.detail);
  out.set_polls(endpoint.polls);
  out.set_registrations(endpoint.registrations);
  out.set_unanswered(endpoint.unanswered);
  for (const auto& [reason, count] : endpoint.refused) {
    podscope::v1::KinetoStatus::Refusals* r = out.add_refused();
    r->set_reason(reason);
    r->set_count(count);
  }
  if (sources.kineto_source != nullptr) {
    const KinetoCaptureSource::TraceCounts traces = sources.kineto_source->trace_counts();
    out.set_traces_merged(traces.merged);
    for (const auto& [reason, count] : traces.refused) {
      podscope::v1::KinetoStatus::Refusals* r = out.add_traces_refused();
      r->set_reason(reason);
      r->set_count(count);
    }
  }
  for (const KinetoProcess& p : sources.kineto_processes.live(sources.clock.now_ns())) {
    podscope::v1::KinetoProcess* k = out.add_processes();
    k->set_pid(p.pid);
    k->set_uid(p.uid);
    k->set_job_id(p.job_id);
    for (int32_t a : p.ancestors) k->add_ancestors(a);
    k->set_gpu(p.gpu);
    k->set_last_poll_ns(p.last_poll_ns);
    k->set_poll_interval_ms(p.poll_interval_ns / 1'000'000);
  }
}

}  // namespace

void fill_agent_status(const AgentStatusSources& sources, podscope::v1::AgentStatus& status) {
  status.set_host_name(sources.host_name);
  status.set_version(PODSCOPE_VERSION);
  status.set_start_time_ns(sources.start_time_ns);
  for (const Collector* c : sources.collectors) {
    const CollectorState state = c->status();
    podscope::v1::CollectorStatus* s = status.add_collectors();
    s->set_name(std::string(c->name()));
    s->set_state(to_proto(state.state));
    s->set_reason(state.reason);
  }
  const ClockHealth clock = sources.clock_health.health();
  status.set_clock_synchronized(clock.synchronized);
  status.set_clock_detail(clock.detail);
  status.set_capture_session_id(sources.captures.running_session());
  status.add_capabilities("tensorflow.ProfilerService");
  status.add_capabilities("tensorflow.ProfileAnalysis");
  status.add_capabilities("podscope.v1.Agent");
  fill_flight_recorder_status(sources, *status.mutable_flight_recorder());
  for (const LocalClientInfo& c : sources.local_clients.clients()) {
    podscope::v1::LocalClient* out = status.add_clients();
    out->set_pid(c.pid);
    out->set_program(c.program);
    out->set_job(c.job);
    for (int32_t core : c.cores) out->add_core_ids(core);
    out->set_dropped_events(c.dropped_events);
    out->set_profiler_port(c.profiler_port);
  }
  fill_kineto_status(sources, *status.mutable_kineto());
  const LocalSocketCounts counts = sources.local_socket_counters.counts();
  podscope::v1::LocalSocketCounts* socket = status.mutable_local_socket();
  socket->set_connections(counts.connections);
  socket->set_registered(counts.registered);
  for (LocalRefusal reason : kLocalRefusals) {
    podscope::v1::LocalSocketCounts::Refusals* refused = socket->add_refused();
    refused->set_reason(std::string(refusal_name(reason)));
    refused->set_count(counts.refused[static_cast<size_t>(reason)]);
  }
}

}  // namespace podscope::agent
