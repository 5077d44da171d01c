#include "agent/kineto/kineto_daemon.h"

#include <variant>

#include "absl/strings/str_join.h"
#include "daemon/log.h"

namespace podscope::agent {
namespace {

namespace ipc = kineto::ipc;

// A burst is drained in batches so that stop() is seen within one batch of a flood.
constexpr int kDatagramsPerWake = 256;
constexpr int kWaitMs = 200;
constexpr int64_t kPublishEveryNs = 1'000'000'000;

std::string refusal_label(size_t reason) {
  return reason < ipc::kRefusals.size() ? std::string(ipc::refusal_name(ipc::kRefusals[reason]))
                                        : std::string(kProcessCapRefusal);
}

}  // namespace

KinetoDaemon::KinetoDaemon(std::string endpoint, std::shared_ptr<KinetoProcesses> processes, const Clock& clock,
                           prometheus::Registry& registry, const std::string& host_name)
    : endpoint_(std::move(endpoint)),
      processes_(std::move(processes)),
      clock_(clock),
      host_name_(host_name),
      polls_(prometheus::BuildCounter()
                 .Name("podscope_kineto_polls_total")
                 .Help("Polls of PyTorch (Kineto) processes on the kineto_endpoint, answered")
                 .Labels({{"host", host_name}})
                 .Register(registry)
                 .Add({})),
      registrations_(prometheus::BuildCounter()
                         .Name("podscope_kineto_registrations_total")
                         .Help("Registrations of Kineto GPU processes on the kineto_endpoint, answered")
                         .Labels({{"host", host_name}})
                         .Register(registry)
                         .Add({})),
      unanswered_(prometheus::BuildCounter()
                      .Name("podscope_kineto_unanswered_total")
                      .Help("Answers to Kineto processes that could not be sent (process gone, its socket full)")
                      .Labels({{"host", host_name}})
                      .Register(registry)
                      .Add({})),
      process_count_(prometheus::BuildGauge()
                         .Name("podscope_kineto_processes")
                         .Help("Kineto processes that polled the kineto_endpoint in the last 60 s")
                         .Labels({{"host", host_name}})
                         .Register(registry)
                         .Add({})),
      last_poll_family_(prometheus::BuildGauge()
                            .Name("podscope_kineto_process_last_poll_seconds")
                            .Help("Unix time of each live Kineto process's last poll, by pid, job id and ancestors")
                            .Labels({{"host", host_name}})
                            .Register(registry)) {
  auto& refused = prometheus::BuildCounter()
                      .Name("podscope_kineto_refused_total")
                      .Help("Datagrams on the kineto_endpoint dropped unanswered, by reason")
                      .Labels({{"host", host_name}})
                      .Register(registry);
  for (size_t i = 0; i < kKinetoRefusalCount; ++i) refused_[i] = &refused.Add({{"reason", refusal_label(i)}});
}

KinetoDaemon::~KinetoDaemon() { stop(); }

absl::Status KinetoDaemon::start() {
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

void KinetoDaemon::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void KinetoDaemon::serve(ipc::FabricEndpoint endpoint) {
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
      publish_processes();
      published_ns = now;
    }
  }
}

void KinetoDaemon::handle(const ipc::FabricEndpoint& endpoint, const ipc::Datagram& datagram) {
  const ipc::Decoded decoded = ipc::decode_message(datagram.bytes, datagram.length);
  std::string answer;
  if (const auto* refusal = std::get_if<ipc::Refusal>(&decoded)) {
    refuse(static_cast<size_t>(*refusal));
    return;
  }
  if (const auto* poll = std::get_if<ipc::Poll>(&decoded)) {
    bool at_cap = false;
    answer = ipc::encode_poll_answer(processes_->on_poll(*poll, clock_.now_ns(), at_cap));
    if (at_cap) refuse(kKinetoRefusalCount - 1);
    polls_.Increment();
  } else {
    answer = ipc::encode_registration_answer(processes_->on_registration(std::get<ipc::Registration>(decoded)));
    registrations_.Increment();
  }
  if (!endpoint.answer(datagram, answer)) unanswered_.Increment();
}

void KinetoDaemon::refuse(size_t reason) { refused_[reason]->Increment(); }

void KinetoDaemon::publish_processes() {
  const std::vector<KinetoProcess> live = processes_->live(clock_.now_ns());
  process_count_.Set(static_cast<double>(live.size()));
  std::map<int32_t, std::pair<std::string, prometheus::Gauge*>> next;
  for (const KinetoProcess& p : live) {
    std::vector<std::string> ancestors;
    for (int32_t a : p.ancestors) ancestors.push_back(std::to_string(a));
    const std::string job = std::to_string(p.job_id);
    const std::string chain = absl::StrJoin(ancestors, ",");
    const std::string key = job + "|" + chain;
    auto old = last_poll_.find(p.pid);
    prometheus::Gauge* gauge = nullptr;
    if (old != last_poll_.end() && old->second.first == key) {
      gauge = old->second.second;
      last_poll_.erase(old);
    } else {
      gauge = &last_poll_family_.Add({{"pid", std::to_string(p.pid)}, {"job_id", job}, {"ancestors", chain}});
    }
    gauge->Set(static_cast<double>(p.last_poll_ns - clock_.offset_ns()) / 1e9);
    next.emplace(p.pid, std::make_pair(key, gauge));
  }
  // What is left polled no more (or changed its labels).
  for (auto& [pid, entry] : last_poll_) last_poll_family_.Remove(entry.second);
  last_poll_ = std::move(next);
}

KinetoEndpointStatus KinetoDaemon::status() const {
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
    out.refused.emplace_back(refusal_label(i), static_cast<uint64_t>(refused_[i]->Value()));
  }
  return out;
}

}  // namespace podscope::agent
