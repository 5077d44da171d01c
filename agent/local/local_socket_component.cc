#include "agent/local/local_socket_component.h"

#include <charconv>
#include <cstdint>
#include <future>

#include <boost/asio/post.hpp>

#include "absl/status/statusor.h"
#include "daemon/unix_socket_path.h"

namespace podscope::agent {
namespace {

absl::StatusOr<std::vector<uid_t>> parse_trusted_uids(const std::vector<std::string>& texts) {
  std::vector<uid_t> uids;
  for (const std::string& text : texts) {
    // Digits only: strtoul would take "-1" as the largest uid and wrap values past uid_t; (uid_t)-1 is no uid.
    uint64_t uid = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), uid);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
        uid >= static_cast<uint64_t>(static_cast<uid_t>(-1))) {
      return absl::InvalidArgumentError("socket_trusted_uids: '" + text + "' is not a uid (0 to " +
                                        std::to_string(static_cast<uid_t>(-1) - 1) + ")");
    }
    uids.push_back(static_cast<uid_t>(uid));
  }
  return uids;
}

}  // namespace

LocalSocketComponent::LocalSocketComponent(boost::asio::io_context& io, LocalSocketSettings settings,
                                           ClientRegistry& registry, const Clock& clock, StepTracker& steps,
                                           StepMetrics& step_metrics)
    : io_(io),
      settings_(std::move(settings)),
      registry_(registry),
      clock_(clock),
      steps_(steps),
      step_metrics_(step_metrics) {}

LocalSocketComponent::~LocalSocketComponent() = default;

absl::Status LocalSocketComponent::start() {
  absl::StatusOr<std::vector<uid_t>> trusted_uids = parse_trusted_uids(settings_.trusted_uids);
  if (!trusted_uids.ok()) return trusted_uids.status();
  if (!settings_.path.empty()) {
    if (absl::Status s = remove_stale_socket(settings_.path); !s.ok()) return s;
  }
  LocalSocketConfig config;
  config.path = settings_.path;
  config.group = settings_.group;
  config.trusted_uids = std::move(*trusted_uids);
  server_ = std::make_unique<LocalSocketServer>(io_, std::move(config), registry_,
                                                [this](int32_t, const local::StepsMsg& m) { record_steps(m); });
  return server_->start();
}

void LocalSocketComponent::stop() {
  if (server_ == nullptr) return;
  // The server lives on the io threads: stop it there, bounded.
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> stopped = done->get_future();
  boost::asio::post(io_, [this, done] {
    server_->stop();
    done->set_value();
  });
  stopped.wait_for(std::chrono::seconds(1));
}

void LocalSocketComponent::record_steps(const local::StepsMsg& steps) {
  for (const local::StepMsg& s : steps.steps) {
    const StepRecord record{
        s.core,      s.step_num,     clock_.from_system_ns(s.begin_ns), clock_.from_system_ns(s.end_ns),
        s.infeed_ns, s.all_reduce_ns};
    steps_.record(record);
    step_metrics_.record(record);
  }
}

}  // namespace podscope::agent
