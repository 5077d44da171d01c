#include "agent/local/local_clients_plugin.h"

#include <future>
#include <memory>

#include <boost/asio/post.hpp>

#include "agent/agent.h"
#include "agent/local/client_registry.h"
#include "agent/local/local_clients_source.h"
#include "agent/local/local_socket_server.h"
#include "agent/local/process_collector.h"
#include "agent/steps/step_metrics.h"
#include "podscope/v1/agent.pb.h"

namespace podscope::agent {
namespace {

class LocalSocketComponent : public AgentComponent {
 public:
  LocalSocketComponent(Agent& agent, std::shared_ptr<ClientRegistry> registry, std::shared_ptr<StepMetrics> metrics)
      : io_(agent.io_context()), registry_(std::move(registry)), metrics_(std::move(metrics)) {
    LocalSocketConfig config;
    config.path = agent.config().socket;
    config.group = agent.config().socket_group;
    for (const std::string& uid : agent.config().socket_trusted_uids) {
      char* end = nullptr;
      const unsigned long v = std::strtoul(uid.c_str(), &end, 10);
      if (uid.empty() || *end != '\0') {
        config_error_ = absl::InvalidArgumentError("socket_trusted_uids: '" + uid + "' is not a numeric uid");
        continue;
      }
      config.trusted_uids.push_back(static_cast<uid_t>(v));
    }
    StepTracker& tracker = agent.step_tracker();
    const Clock& clock = agent.clock();
    server_ = std::make_unique<LocalSocketServer>(io_, config, *registry_,
                                                  [this, &tracker, &clock](int32_t, const local::StepsMsg& m) {
                                                    for (const local::StepMsg& s : m.steps) {
                                                      const StepRecord r{s.core,
                                                                         s.step_num,
                                                                         clock.from_system_ns(s.begin_ns),
                                                                         clock.from_system_ns(s.end_ns),
                                                                         s.infeed_ns,
                                                                         s.all_reduce_ns};
                                                      tracker.record(r);
                                                      metrics_->record(r);
                                                    }
                                                  });
  }

  std::string_view name() const override { return "local_socket"; }
  absl::Status start() override {
    if (!config_error_.ok()) return config_error_;
    return server_->start();
  }
  void stop() override {
    // The server lives on the io threads: stop it there, bounded.
    auto done = std::make_shared<std::promise<void>>();
    auto future = done->get_future();
    boost::asio::post(io_, [this, done] {
      server_->stop();
      done->set_value();
    });
    future.wait_for(std::chrono::seconds(1));
  }

 private:
  boost::asio::io_context& io_;
  std::shared_ptr<ClientRegistry> registry_;
  std::shared_ptr<StepMetrics> metrics_;
  absl::Status config_error_;
  std::unique_ptr<LocalSocketServer> server_;
};

}  // namespace

void install_local_clients(Agent& agent) {
  auto registry = std::make_shared<ClientRegistry>();
  auto metrics = std::make_shared<StepMetrics>(agent.registry(), agent.host_name());
  agent.add_component(std::make_unique<LocalSocketComponent>(agent, registry, metrics));
  agent.add_capture_source(std::make_unique<LocalClientsSource>(
      registry, agent.clock(), [metrics](uint64_t dropped) { metrics->add_dropped_events(dropped); }));
  agent.add_collector(std::make_unique<ProcessCollector>(registry));
  agent.add_status_contributor([registry](podscope::v1::AgentStatus& status) {
    for (const LocalClientInfo& c : registry->clients()) {
      auto* out = status.add_clients();
      out->set_pid(c.pid);
      out->set_program(c.program);
      out->set_job(c.job);
      for (int32_t core : c.cores) out->add_core_ids(core);
      out->set_dropped_events(c.dropped_events);
    }
  });
}

}  // namespace podscope::agent
