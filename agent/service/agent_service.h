// podscope.v1.Agent: Ping for the coordinator's clock-offset estimate (t1 stamped on arrival, t2 just before
// answering, on the agent's Clock including --clock_offset_ns), GetStatus for `podscope status`, and the flight
// recorder's past: a recorded window (the last N ms, or a span of the agent's clock) and stored snapshots by id.
// The recorded-window calls are gated by allowed_clients; Ping and GetStatus are open to any caller TLS admits.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "agent/capture/capture_session.h"
#include "agent/capture/capture_source.h"
#include "agent/capture/repository_quota.h"
#include "agent/recorder/flight_recorder.h"
#include "agent/recorder/triggered_snapshots.h"
#include "agent/service/agent_metrics.h"
#include "agent/service/raw_answer.h"
#include "podscope/v1/agent.grpc.pb.h"
#include "daemon/clock.h"
#include "tls/call_authorizer.h"

namespace podscope::agent {

// GetRecordedWindow answers raw: the window's XSpace goes out as the bytes it was built as (raw_answer.h).
class AgentServiceImpl final
    : public podscope::v1::Agent::WithRawCallbackMethod_GetRecordedWindow<podscope::v1::Agent::Service> {
 public:
  // `fill_status` writes everything the agent knows into a status (collectors, clock, capture, clients...).
  // `start_lead` is the lead captures need now (CaptureSessions::start_lead), answered with every Ping, and so is
  // `host_name`; a Ping naming `instance_id` (the agent's own, chosen at start) is told so. `limits` are the captures'
  // (CaptureSessions::limits): the bucket roots a window may be written into and where a failed upload is kept.
  AgentServiceImpl(const Clock& clock, std::string host_name, std::string instance_id,
                   std::function<void(podscope::v1::AgentStatus&)> fill_status, std::function<StartLead()> start_lead,
                   std::function<CaptureLimits()> limits, FlightRecorder& recorder, const TriggeredSnapshots& snapshots,
                   RequestMetrics& metrics, RepositoryQuota& quota, tls::CallAuthorizer& authorizer);

  grpc::Status Ping(grpc::ServerContext* context, const podscope::v1::PingRequest* request,
                    podscope::v1::PingResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const podscope::v1::StatusRequest* request,
                         podscope::v1::AgentStatus* response) override;
  // A podscope.v1.RecordedWindowRequest, answered with a podscope.v1.RecordedWindowResponse.
  grpc::ServerUnaryReactor* GetRecordedWindow(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) override;
  grpc::Status GetStoredSnapshot(grpc::ServerContext* context, const podscope::v1::StoredSnapshotRequest* request,
                                 podscope::v1::RecordedWindowResponse* response) override;

 private:
  grpc::Status answer_window(grpc::CallbackServerContext& context, const podscope::v1::RecordedWindowRequest& request,
                             grpc::ByteBuffer& response);

  const Clock& clock_;
  const std::string host_name_;
  const std::string instance_id_;
  std::function<void(podscope::v1::AgentStatus&)> fill_status_;
  std::function<StartLead()> start_lead_;
  std::function<CaptureLimits()> limits_;
  FlightRecorder& recorder_;
  const TriggeredSnapshots& snapshots_;
  RequestMetrics& metrics_;
  RepositoryQuota& quota_;  // charged with the captures kept locally when their upload failed
  tls::CallAuthorizer& authorizer_;
  AnswerThreads answer_threads_;
};

}  // namespace podscope::agent
