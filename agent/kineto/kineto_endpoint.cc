#include "agent/kineto/kineto_endpoint.h"

#include <variant>

#include "agent/kineto/process_lineage.h"
#include "daemon/host_metrics.h"
#include "daemon/log.h"

namespace podscope::agent {
namespace {

namespace ipc = kineto::ipc;

// A burst is drained in batches so that stop() is seen within one batch of a flood.
constexpr int kDatagramsPerWake = 256;
constexpr int kWaitMs = 200;
constexpr int64_t kPublishEveryNs = 1'000'000'000;

std::string_view refusal_label(size_t reason) {
  return reason < ipc::kRefusals.size() ? ipc::refusal_name(ipc::kRefusals[reason])
                                        : kKinetoEndpointRefusals[reason - ipc::kRefusals.size()];
}

}  // namespace

KinetoEndpoint::KinetoEndpoint(std::string endpoint, std::shared_ptr<KinetoProcesses> processes, const Clock& clock,
                               prometheus::Registry& registry, const std::string& host_name)
    : endpoint_(std::move(endpoint)),
      processes_(std::move(processes)),
      clock_(clock),
      host_name_(host_name),
      polls_(host_counter(registry, host_name, "podscope_kineto_polls_total",
                          "Polls of PyTorch (Kineto) processes on the kineto_endpoint, answered")),
      registrations_(host_counter(registry, host_name, "podscope_kineto_registrations_total",
                                  "Registrations of Kineto GPU processes on the kineto_endpoint, answered")),
      unanswered_(host_counter(registry, host_name, "podscope_kineto_unanswered_total",
                               "Answers to Kineto processes that could not be sent (process gone, its socket full)")),
      process_count_(host_gauge(registry, host_name, "podscope_kineto_processes",
                                "Kineto processes that polled the kineto_endpoint in the last 60 s")) {
  auto& refused = host_family<prometheus::Counter>(registry, host_name, "podscope_kineto_refused_total",
                                                   "Datagrams on the kineto_endpoint dropped unanswered, by reason");
  for (size_t i = 0; i < kKinetoRefusalCount; ++i) {
    refused_[i] = &refused.Add({{"reason", std::string(refusal_label(i))}});
  }
}

KinetoEndpoint::~KinetoEndpoint() { stop(); }

absl::Status KinetoEndpoint::start() {
  if (endpoint_.empty()) {
    std::lock_guard lock(mu_);
    state_ = KinetoEndpointStatus::State::kOff;
    detail_ = "off (kineto_endpoint is empty)";
    return absl::OkStatus();
  }
  absl::StatusOr<ipc::FabricEndpoint> endpoint = [&]() -> absl::StatusOr<ipc::FabricEndpoint> {
    absl::StatusOr<ipc::FabricAddress> address = ipc::fabric_address(endpoint_);
    if (!address.ok()) return address.status();
    absl::StatusOr<ipc::FabricEndpoint> bound = ipc::FabricEndpoint::bind(*address);
    if (bound.ok()) {
      std::lock_guard lock(mu_);
      detail_ = "serving " + address->description;
    }
    return bound;
  }();
  if (!endpoint.ok()) {
    std::lock_guard lock(mu_);
    state_ = KinetoEndpointStatus::State::kUnavailable;
    detail_ = std::string(endpoint.status().message());
    PODSCOPE_LOG(kWarning) << "kineto_endpoint: " << detail_ << "; PyTorch processes are not served";
    return absl::OkStatus();
  }
  {
    std::lock_guard lock(mu_);
    state_ = KinetoEndpointStatus::State::kServing;
    PODSCOPE_LOG(kInfo) << "kineto_endpoint: " << detail_;
  }
  thread_ = std::thread([this, e = std::move(*endpoint)]() mutable { serve(std::move(e)); });
  return absl::OkStatus();
}

void KinetoEndpoint::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void KinetoEndpoint::serve(ipc::FabricEndpoint endpoint) {
  int64_t published_ns = 0;
  while (!stopping_) {
    if (endpoint.wait_readable(kWaitMs)) {
      for (int i = 0; i < kDatagramsPerWake; ++i) {
        std::optional<ipc::Datagram> d = endpoint.receive();
        if (!d) break;
        handle(endpoint, *d);
      }
    }
    const int64_t now = clock_.now_ns();
    if (now - published_ns >= kPublishEveryNs) {
      process_count_.Set(static_cast<double>(processes_->live(now).size()));
      published_ns = now;
    }
  }
}

void KinetoEndpoint::handle(const ipc::FabricEndpoint& endpoint, const ipc::Datagram& datagram) {
  const ipc::Decoded decoded = ipc::decode_message(datagram.bytes, datagram.length);
  if (const auto* refusal = std::get_if<ipc::Refusal>(&decoded)) {
    refuse(ipc::refusal_name(*refusal));
    return;
  }
  const auto* poll = std::get_if<ipc::Poll>(&decoded);
  const auto* registration = std::get_if<ipc::Registration>(&decoded);
  const std::variant<VerifiedSender, Lie> verified =
      verify_sender(datagram.sender, poll ? poll->pids : std::vector<int32_t>{registration->pid});
  if (const Lie* lie = std::get_if<Lie>(&verified)) {
    refuse(lie_name(*lie));
    return;
  }
  const VerifiedSender& sender = std::get<VerifiedSender>(verified);
  std::string answer;
  if (poll) {
    PollRefusal refused = PollRefusal::kNone;
    answer = ipc::encode_poll_answer(processes_->on_poll(sender, *poll, clock_.now_ns(), refused));
    if (refused == PollRefusal::kProcessCap) refuse("process_cap");
    if (refused == PollRefusal::kUidCap) refuse("uid_cap");
    polls_.Increment();
  } else {
    answer = ipc::encode_registration_answer(processes_->on_registration(sender, *registration));
    registrations_.Increment();
  }
  if (!endpoint.answer(datagram, answer)) unanswered_.Increment();
}

void KinetoEndpoint::refuse(std::string_view reason) {
  for (size_t i = 0; i < kKinetoRefusalCount; ++i) {
    if (refusal_label(i) == reason) refused_[i]->Increment();
  }
}

KinetoEndpointStatus KinetoEndpoint::status() const {
  KinetoEndpointStatus out;
  out.endpoint = endpoint_;
  {
    std::lock_guard lock(mu_);
    out.state = state_;
    out.detail = detail_;
  }
  out.polls = static_cast<uint64_t>(polls_.Value());
  out.registrations = static_cast<uint64_t>(registrations_.Value());
  out.unanswered = static_cast<uint64_t>(unanswered_.Value());
  for (size_t i = 0; i < kKinetoRefusalCount; ++i) {
    out.refused.emplace_back(std::string(refusal_label(i)), static_cast<uint64_t>(refused_[i]->Value()));
  }
  return out;
}

}  // namespace podscope::agent
