// The coordinator's memory and CPU at scale: a real podscope-coordinator process, measured (its RSS, and its CPU
// seconds from /proc/<pid>/stat) while empty (the baseline of every ratio, same run), idle with `live` registered
// agents, idle with `registered` agents, and during one pod capture of the live ones with every agent registered.
// Every agent registers as agents do (podscope.v1.Coordinator/Register, which the coordinator proves by calling the
// registered address back: Ping with the registration's instance id must answer the registered host name and that
// the instance is its own) and heartbeats at the interval the coordinator asks for, from this process. The live
// agents are LightweightAgents (real gRPC servers on loopback, one per agent, tests/pod_capture/lightweight_agent.h)
// in job "live"; the others, in job "idle", are answered by one shared server of this process that knows every idle
// agent's name and instance id, so each has an address the coordinator calls back and clock-syncs like any other
// (one channel per worker), without 10,000 servers in one process.
// Usage: coordinator_scale_bench [--live 1024] [--registered 10000] [--idle_s 10] [--duration_ms 1000]
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "podscope/v1/agent.grpc.pb.h"
#include "podscope/v1/coordinator.grpc.pb.h"
#include "tests/pod_capture/lightweight_agent.h"

namespace {

using Seconds = std::chrono::duration<double>;

// The coordinator as a process of its own: its port read from its "listening" line, killed and reaped at the end.
class CoordinatorProcess {
 public:
  explicit CoordinatorProcess(const std::filesystem::path& root, int max_workers) {
    const std::string binary = std::string(PODSCOPE_BINARY_DIR) + "/bin/podscope-coordinator";
    std::vector<std::string> args = {binary,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--metrics_listen",
                                     "127.0.0.1:0",
                                     "--repository_root",
                                     root.string(),
                                     "--max_workers",
                                     std::to_string(max_workers)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) std::exit(1);
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      dup2(out[1], 2);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    // Its "podscope-coordinator listening grpc=HOST:PORT ..." line names the port it picked.
    FILE* err = fdopen(out[0], "r");
    char line[4096];
    while (std::fgets(line, sizeof line, err) != nullptr) {
      const char* grpc = std::strstr(line, "grpc=127.0.0.1:");
      if (grpc != nullptr) {
        port_ = std::atoi(grpc + std::strlen("grpc=127.0.0.1:"));
        break;
      }
    }
    if (port_ == 0) {
      std::fprintf(stderr, "podscope-coordinator did not say where it listens\n");
      std::exit(1);
    }
    // Keep draining its output so it never blocks on a full pipe.
    drain_ = std::thread([err] {
      char rest[4096];
      while (std::fgets(rest, sizeof rest, err) != nullptr) {}
      std::fclose(err);
    });
  }
  ~CoordinatorProcess() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    drain_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = 0;
  int port_ = 0;
  std::thread drain_;
};

double rss_mib(pid_t pid, const char* field = "VmRSS:") {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::atof(line.c_str() + std::strlen(field)) / 1024.0;
  }
  return 0;
}

// Resets the process's peak RSS to what it holds now.
void reset_peak(pid_t pid) { std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5"; }

double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  long long ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::atoll(field.c_str());  // utime, stime
  }
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double load_average() {
  double one = 0;
  std::ifstream("/proc/loadavg") >> one;
  return one;
}

// The idle agents' shared server: answers each one's Ping as that agent would (its name; whether the instance id is
// its own), and every other Ping as an agent answers the coordinator's clock-sync pings.
class SharedAgents final : public podscope::v1::Agent::CallbackService {
 public:
  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context, const podscope::v1::PingRequest* request,
                                 podscope::v1::PingResponse* response) override {
    const int64_t now =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    response->set_server_receive_ns(now);
    response->set_client_send_ns(request->client_send_ns());
    if (!request->instance_id().empty()) {
      std::lock_guard lock(mu_);
      auto it = by_instance_.find(request->instance_id());
      if (it != by_instance_.end()) response->set_host_name(it->second);
      response->set_instance_matches(it != by_instance_.end());
    }
    response->set_server_send_ns(now);
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  void add(const std::string& instance_id, const std::string& host_name) {
    std::lock_guard lock(mu_);
    by_instance_[instance_id] = host_name;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> by_instance_;
};

struct Registration {
  std::string host_name, address, job, instance_id;
};

// Registers every agent, `threads` at a time (the coordinator checks at most 4 of one source at once).
void register_all(podscope::v1::Coordinator::Stub& coordinator, const std::vector<Registration>& agents, int threads) {
  std::atomic<size_t> next{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < agents.size(); i = next++) {
        podscope::v1::RegisterRequest request;
        request.set_host_name(agents[i].host_name);
        request.set_address(agents[i].address);
        request.set_job(agents[i].job);
        request.set_instance_id(agents[i].instance_id);
        podscope::v1::RegisterResponse response;
        for (int attempt = 0; attempt < 20; ++attempt) {
          grpc::ClientContext context;
          context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
          const grpc::Status status = coordinator.Register(&context, request, &response);
          if (status.ok()) break;
          if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED || attempt == 19) {
            std::fprintf(stderr, "registration of %s refused: %s\n", agents[i].host_name.c_str(),
                         status.error_message().c_str());
            ++refused;
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  if (refused > 0) std::exit(1);
}

// Every registered agent heartbeats once per `interval`, spread over it, as agents do, until stopped.
class Heartbeats {
 public:
  Heartbeats(podscope::v1::Coordinator::Stub& coordinator, std::chrono::milliseconds interval)
      : coordinator_(coordinator), interval_(interval), thread_([this] { run(); }) {}
  ~Heartbeats() {
    stop_ = true;
    thread_.join();
  }
  void set_agents(std::vector<Registration> agents) {
    std::lock_guard lock(mu_);
    agents_ = std::move(agents);
  }

 private:
  void run() {
    size_t next = 0;
    while (!stop_) {
      Registration agent;
      size_t count = 0;
      {
        std::lock_guard lock(mu_);
        count = agents_.size();
        if (count > 0) agent = agents_[next++ % count];
      }
      if (count == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      const auto due = std::chrono::steady_clock::now() + interval_ / count;
      podscope::v1::HeartbeatRequest request;
      request.set_host_name(agent.host_name);
      request.set_address(agent.address);
      podscope::v1::HeartbeatResponse response;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      coordinator_.Heartbeat(&context, request, &response);
      std::this_thread::sleep_until(due);
    }
  }
  podscope::v1::Coordinator::Stub& coordinator_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::vector<Registration> agents_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Sample {
  double rss_mib = 0, cpu_per_s = 0, load = 0;
};

// The coordinator's RSS at the end of `seconds` and its CPU seconds per second over them.
Sample idle(pid_t pid, int seconds) {
  const double cpu_before = cpu_seconds(pid);
  const auto began = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double wall = Seconds(std::chrono::steady_clock::now() - began).count();
  return {rss_mib(pid), (cpu_seconds(pid) - cpu_before) / wall, load_average()};
}

// Workers the coordinator lists as up, and those of them it has measured the clock of.
std::pair<int, int> workers_up(podscope::v1::Coordinator::Stub& coordinator) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  podscope::v1::ListWorkersResponse response;
  if (!coordinator.ListWorkers(&context, {}, &response).ok()) return {0, 0};
  int up = 0, measured = 0;
  for (const auto& worker : response.workers()) {
    up += worker.up() ? 1 : 0;
    measured += worker.clock_rtt_ns() > 0 ? 1 : 0;
  }
  return {up, measured};
}

void wait_for_clocks(podscope::v1::Coordinator::Stub& coordinator, int workers) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < give_up) {
    const auto [up, measured] = workers_up(coordinator);
    if (up >= workers && measured >= workers) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const auto [up, measured] = workers_up(coordinator);
  std::fprintf(stderr, "only %d of %d workers up, %d measured, after 120 s\n", up, workers, measured);
}

void print(const char* what, const Sample& s, const Sample& empty) {
  // An empty coordinator's CPU is often below the clock tick over a window: its ratio is then not a number.
  char cpu_ratio[16] = "—";
  if (empty.cpu_per_s > 0) std::snprintf(cpu_ratio, sizeof cpu_ratio, "%.1f×", s.cpu_per_s / empty.cpu_per_s);
  std::printf("%-44s %9.1f MiB %6.2f× %10.3f CPU s/s %9s %6.1f\n", what, s.rss_mib,
              empty.rss_mib > 0 ? s.rss_mib / empty.rss_mib : 0.0, s.cpu_per_s, cpu_ratio, s.load);
}

}  // namespace

int main(int argc, char** argv) {
  int live = 1024, registered = 10'000, idle_s = 10;
  int64_t duration_ms = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--live") == 0) live = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--registered") == 0) registered = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--idle_s") == 0) idle_s = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--duration_ms") == 0) duration_ms = std::atoll(argv[i + 1]);
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure as it is measured, also into a file
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);

  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("podscope_coordinator_scale_" + std::to_string(getpid()));
  std::filesystem::create_directories(root);
  {
    CoordinatorProcess coordinator_process(root, registered + 100);
    const pid_t pid = coordinator_process.pid();
    auto channel = grpc::CreateChannel(coordinator_process.address(), grpc::InsecureChannelCredentials());
    auto coordinator = podscope::v1::Coordinator::NewStub(channel);
    std::printf("podscope-coordinator (pid %d): %d live agents, %d registered, %d s idle windows, %u CPUs\n", pid, live,
                registered, idle_s, std::thread::hardware_concurrency());
    std::printf("%-44s %13s %7s %19s %9s %6s\n", "coordinator", "RSS", "/empty", "CPU", "/empty", "load");

    const Sample empty = idle(pid, idle_s);
    print("empty", empty, empty);

    // The live agents: one server each.
    podscope::testing::TimerThread timers;
    std::vector<std::unique_ptr<podscope::testing::LightweightAgent>> agents;
    std::vector<Registration> live_agents;
    for (int i = 0; i < live; ++i) {
      podscope::testing::LightweightAgentOptions options;
      options.host_name = "live" + std::to_string(i);
      options.instance_id = "live-instance-" + std::to_string(i);
      agents.push_back(std::make_unique<podscope::testing::LightweightAgent>(options, timers));
      live_agents.push_back({options.host_name, agents.back()->address(), "live", options.instance_id});
    }
    Heartbeats heartbeats(*coordinator, std::chrono::milliseconds(5000));
    auto began = std::chrono::steady_clock::now();
    double cpu_before = cpu_seconds(pid);
    register_all(*coordinator, live_agents, 4);
    std::printf("registered %d live agents in %.1f s, the coordinator's CPU %.2f s (%.0f µs per registration)\n", live,
                Seconds(std::chrono::steady_clock::now() - began).count(), cpu_seconds(pid) - cpu_before,
                (cpu_seconds(pid) - cpu_before) * 1e6 / live);
    heartbeats.set_agents(live_agents);
    wait_for_clocks(*coordinator, live);
    const Sample with_live = idle(pid, idle_s);
    print(("idle, " + std::to_string(live) + " live registered").c_str(), with_live, empty);

    // The idle agents: registered, called back and clock-synced at one shared server.
    SharedAgents shared;
    grpc::ServerBuilder builder;
    int shared_port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &shared_port);
    builder.RegisterService(&shared);
    std::unique_ptr<grpc::Server> shared_server = builder.BuildAndStart();
    std::vector<Registration> idle_agents;
    for (int i = live; i < registered; ++i) {
      idle_agents.push_back({"idle" + std::to_string(i), "127.0.0.1:" + std::to_string(shared_port), "idle",
                             "idle-instance-" + std::to_string(i)});
      shared.add(idle_agents.back().instance_id, idle_agents.back().host_name);
    }
    began = std::chrono::steady_clock::now();
    cpu_before = cpu_seconds(pid);
    register_all(*coordinator, idle_agents, 4);
    std::printf("registered %zu more agents in %.1f s, the coordinator's CPU %.2f s (%.0f µs per registration)\n",
                idle_agents.size(), Seconds(std::chrono::steady_clock::now() - began).count(),
                cpu_seconds(pid) - cpu_before, (cpu_seconds(pid) - cpu_before) * 1e6 / idle_agents.size());
    std::vector<Registration> everyone = live_agents;
    everyone.insert(everyone.end(), idle_agents.begin(), idle_agents.end());
    heartbeats.set_agents(everyone);
    wait_for_clocks(*coordinator, registered);
    const Sample with_all = idle(pid, idle_s);
    print(("idle, " + std::to_string(registered) + " registered").c_str(), with_all, empty);

    // One capture of the live agents.
    reset_peak(pid);
    cpu_before = cpu_seconds(pid);
    began = std::chrono::steady_clock::now();
    grpc::ClientContext context;
    podscope::v1::CaptureRequest request;
    request.add_jobs("live");
    request.set_duration_ms(static_cast<uint64_t>(duration_ms));
    request.set_num_tracing_attempts(1);
    auto stream = coordinator->Capture(&context, request);
    podscope::v1::CaptureChunk chunk;
    int exit_code = -1;
    uint64_t file_bytes = 0;
    double first_file_s = 0;
    std::string capture_json;  // its phases' times: collected_in_ms, analyzed_in_ms, ...
    while (stream->Read(&chunk)) {
      const double at = Seconds(std::chrono::steady_clock::now() - began).count();
      if (chunk.has_progress()) std::printf("  %6.2f s  %s\n", at, chunk.progress().c_str());
      if (chunk.has_file() && file_bytes == 0) first_file_s = at;
      if (chunk.has_file()) file_bytes += chunk.file().data().size();
      if (chunk.has_file() && chunk.file().relative_path() == "capture.json") capture_json += chunk.file().data();
      if (chunk.has_summary()) exit_code = chunk.summary().exit_code();
    }
    const grpc::Status finished = stream->Finish();
    const double wall = Seconds(std::chrono::steady_clock::now() - began).count();
    const double capture_cpu = cpu_seconds(pid) - cpu_before;
    const Sample capture{rss_mib(pid, "VmHWM:"), capture_cpu / wall, load_average()};
    print(
        ("capture of " + std::to_string(live) + " (peak RSS, CPU over its " + std::to_string(wall).substr(0, 4) + " s)")
            .c_str(),
        capture, empty);
    std::printf(
        "capture: %s, exit code %d, its files' first byte after %.2f s, %.1f MiB of files streamed, the "
        "coordinator's CPU %.2f s in all\n",
        finished.ok() ? "ok" : finished.error_message().c_str(), exit_code, first_file_s,
        static_cast<double>(file_bytes) / (1 << 20), capture_cpu);
    for (const char* phase : {"\"clock_sync_in_ms\"", "\"collected_in_ms\"", "\"analyzed_in_ms\""}) {
      const size_t at = capture_json.find(phase);
      if (at != std::string::npos)
        std::printf("capture.json %s\n", capture_json.substr(at, capture_json.find_first_of(",\n}", at) - at).c_str());
    }
    std::printf("per registered agent (idle, all registered over empty): %.1f KiB RSS, %.1f µs CPU per s\n",
                (with_all.rss_mib - empty.rss_mib) * 1024 / registered,
                (with_all.cpu_per_s - empty.cpu_per_s) * 1e6 / registered);
    shared_server->Shutdown();
  }
  std::filesystem::remove_all(root);
  return 0;
}
