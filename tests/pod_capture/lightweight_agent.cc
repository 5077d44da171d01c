#include "tests/pod_capture/lightweight_agent.h"

#include <random>

#include "daemon/clock.h"
#include "podscope/v1/agent.grpc.pb.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tensorflow/profiler_service.grpc.pb.h"

namespace podscope::testing {

namespace {
int64_t system_now_ns() { return Clock().now_ns(); }
}  // namespace

TimerThread::TimerThread(Wait wait) : wait_(wait), thread_([this] { run(); }) {}

TimerThread::~TimerThread() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void TimerThread::at(int64_t system_ns, std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    queue_.push({system_ns, seq_++, std::move(fn)});
  }
  cv_.notify_all();
}

void TimerThread::run() {
  std::unique_lock lock(mu_);
  while (true) {
    if (queue_.empty()) {
      if (stop_) return;
      cv_.wait(lock);
      continue;
    }
    const int64_t due = queue_.top().due_ns;
    const int64_t now = system_now_ns();
    if (due > now) {
      // Sleep on the condition variable until shortly before, then spin the rest: wake-up latency of a
      // sleeping thread would otherwise dominate the skew being measured.
      if (wait_ == Wait::kSleeping) {
        cv_.wait_for(lock, std::chrono::nanoseconds(due - now));
      } else if (due - now > 200'000) {
        cv_.wait_for(lock, std::chrono::nanoseconds(due - now - 150'000));
      } else {
        lock.unlock();
        while (system_now_ns() < due) {}
        lock.lock();
      }
      continue;
    }
    auto fn = std::move(const_cast<Entry&>(queue_.top()).fn);
    queue_.pop();
    lock.unlock();
    fn();
    lock.lock();
  }
}

class LightweightAgent::Services final : public tensorflow::ProfilerService::CallbackService,
                                         public podscope::v1::Agent::CallbackService {
 public:
  explicit Services(LightweightAgent& owner) : owner_(owner), clock_(owner.options_.clock_offset_ns) {}

  grpc::ServerUnaryReactor* Profile(grpc::CallbackServerContext* context, const tensorflow::ProfileRequest* request,
                                    tensorflow::ProfileResponse* response) override {
    auto* reactor = context->DefaultReactor();
    const int call = owner_.profile_calls_++;
    if (call < owner_.options_.failing_profiles) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "lightweight agent: injected failure"));
      return reactor;
    }
    const int64_t offset = owner_.options_.clock_offset_ns;
    const int64_t requested = static_cast<int64_t>(request->opts().start_timestamp_ns());
    const int64_t start_system = requested > 0 ? requested - offset : system_now_ns();
    const int64_t duration_ns = static_cast<int64_t>(request->duration_ms()) * 1'000'000;
    owner_.timers_.at(start_system, [this, reactor, response, duration_ns] {
      const int64_t actual_start_system = system_now_ns();
      {
        std::lock_guard lock(owner_.mu_);
        owner_.actual_starts_.push_back(actual_start_system);
      }
      owner_.timers_.at(actual_start_system + duration_ns, [this, reactor, response, actual_start_system] {
        fill_space(actual_start_system, system_now_ns(), *response);
        reactor->Finish(grpc::Status::OK);
      });
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* Terminate(grpc::CallbackServerContext* context, const tensorflow::TerminateRequest*,
                                      tensorflow::TerminateResponse*) override {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* Monitor(grpc::CallbackServerContext* context, const tensorflow::MonitorRequest* request,
                                    tensorflow::MonitorResponse* response) override {
    auto* reactor = context->DefaultReactor();
    const double step_ms = static_cast<double>(owner_.options_.step_period_ns) / 1e6;
    owner_.timers_.at(
        system_now_ns() + static_cast<int64_t>(request->duration_ms()) * 1'000'000, [this, reactor, response, step_ms] {
          auto* result = response->mutable_monitor_result();
          result->set_response_type(tensorflow::ProfilerServiceMonitorResult::UTIL_IDLE_STEP);
          result->set_step_time_ms_avg(step_ms);
          result->set_step_time_ms_min(step_ms);
          result->set_step_time_ms_max(step_ms);
          response->set_data("Step time: avg " + std::to_string(step_ms) + " ms (" + owner_.options_.host_name + ")\n");
          reactor->Finish(grpc::Status::OK);
        });
    return reactor;
  }

  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context, const podscope::v1::PingRequest* request,
                                 podscope::v1::PingResponse* response) override {
    auto* reactor = context->DefaultReactor();
    const auto& o = owner_.options_;
    ++owner_.ping_calls_;
    if (!o.ping_rpc) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no Ping here"));
      return reactor;
    }
    response->set_client_send_ns(request->client_send_ns());
    // Names itself as podscope-agent does: a coordinator checks a registration by calling its address back.
    response->set_host_name(o.host_name);
    if (!request->instance_id().empty()) response->set_instance_matches(request->instance_id() == o.instance_id);
    const int64_t request_delay = o.ping_request_delay_ns + jitter();
    const int64_t response_delay = o.ping_response_delay_ns + jitter();
    if (request_delay == 0 && response_delay == 0) {
      response->set_server_receive_ns(clock_.now_ns());
      response->set_server_send_ns(clock_.now_ns());
      reactor->Finish(grpc::Status::OK);
      return reactor;
    }
    // The request "arrives" after its path delay; the response "leaves" and then travels its own.
    TimerThread& path = o.path_timers != nullptr ? *o.path_timers : owner_.timers_;
    path.at(system_now_ns() + request_delay, [this, &path, reactor, response, response_delay] {
      response->set_server_receive_ns(clock_.now_ns());
      response->set_server_send_ns(clock_.now_ns());
      path.at(system_now_ns() + response_delay, [reactor] { reactor->Finish(grpc::Status::OK); });
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context, const podscope::v1::StatusRequest*,
                                      podscope::v1::AgentStatus* status) override {
    status->set_host_name(owner_.options_.host_name);
    status->set_version("lightweight");
    status->set_now_ns(clock_.now_ns());
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  int64_t jitter() {
    const int64_t j = owner_.options_.ping_jitter_ns;
    if (j == 0) return 0;
    std::lock_guard lock(rng_mu_);
    return std::uniform_int_distribution<int64_t>(-j, j)(rng_);
  }

  // One host plane with a Steps line: steps on the system clock's grid, written on this agent's clock.
  void fill_space(int64_t start_system, int64_t end_system, tensorflow::ProfileResponse& response) {
    auto& space = *response.mutable_xspace();
    space.add_hostnames(owner_.options_.host_name);
    if (owner_.options_.empty_trace) {
      response.set_empty_trace(true);
      return;
    }
    const int64_t offset = owner_.options_.clock_offset_ns;
    xspace::XPlaneBuilder plane(xspace::find_or_add_plane(space, xspace::kHostPlaneName));
    plane.stats()
        .add(xspace::kHostNameStat, std::string_view(owner_.options_.host_name))
        .add(xspace::kCaptureStartStat, start_system + offset)
        .add(xspace::kCaptureEndStat, end_system + offset);
    auto steps = plane.line_named(xspace::kStepsLineName);
    const int64_t period = owner_.options_.step_period_ns;
    for (int64_t s = (start_system / period + 1) * period; s + period <= end_system; s += period) {
      steps.add_event("train_step", s + offset, period - 1000).add(xspace::kStepNumStat, s / period);
    }
  }

  LightweightAgent& owner_;
  Clock clock_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_{std::random_device{}()};
};

LightweightAgent::LightweightAgent(LightweightAgentOptions options, TimerThread& timers)
    : options_(std::move(options)), timers_(timers), services_(std::make_unique<Services>(*this)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", options_.credentials, &port_);
  builder.RegisterService(static_cast<tensorflow::ProfilerService::CallbackService*>(services_.get()));
  builder.RegisterService(static_cast<podscope::v1::Agent::CallbackService*>(services_.get()));
  server_ = builder.BuildAndStart();
}

LightweightAgent::~LightweightAgent() { shutdown(); }

void LightweightAgent::shutdown() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
  }
}

std::vector<int64_t> LightweightAgent::actual_starts_system_ns() const {
  std::lock_guard lock(mu_);
  return actual_starts_;
}

}  // namespace podscope::testing
