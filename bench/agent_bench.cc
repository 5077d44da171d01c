// podscope-agent costs, each next to a baseline measured in the same run:
//   sampling pass CPU (all host collectors → series store → Prometheus registry) vs just reading the /proc files;
//   scrape CPU in-process (registry → text) and of the real agent process per HTTP scrape, vs node_exporter's
//   per scrape when prometheus-node-exporter is installed;
//   the real agent's idle CPU (1 s sampling) and RSS, vs their targets.
// Usage: agent_bench [--agent PATH] [--idle_s 10] [--scrapes 300] [--passes 2000]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <iostream>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/collectors/host_collectors.h"
#include "agent/collectors/proc_text.h"
#include "agent/collectors/sampler.h"
#include "agent/series/series_store.h"
#include "tests/http_client.h"

namespace {

using namespace podscope::agent;

double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

template <typename F>
double cpu_us_per_call(int n, F&& f) {
  f();  // warm up (first pass declares the series)
  const double start = thread_cpu_us();
  for (int i = 0; i < n; ++i) f();
  return (thread_cpu_us() - start) / n;
}

// Per-thread CPU time in ns (from /proc/<pid>/task/*/schedstat: ns precision, unlike the tick counts in stat).
std::map<std::string, std::pair<std::string, int64_t>> thread_cpu_ns(pid_t pid) {
  std::map<std::string, std::pair<std::string, int64_t>> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(dir)) {
    std::ifstream comm(task.path() / "comm"), sched(task.path() / "schedstat");
    std::string name;
    int64_t ns = 0;
    std::getline(comm, name);
    sched >> ns;
    out[task.path().filename()] = {name, ns};
  }
  return out;
}

int64_t process_cpu_ns(pid_t pid) {
  int64_t total = 0;
  for (const auto& [tid, entry] : thread_cpu_ns(pid)) total += entry.second;
  return total;
}

double process_rss_mb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

bool http_get(int port, std::string* body) {
  const int fd = podscope::testing::connect_loopback(port);
  if (fd < 0) return false;
  const timeval timeout{5, 0};  // a server that hangs fails the measurement instead of the whole run
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const char request[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, request, sizeof(request) - 1) < 0) {
    close(fd);
    return false;
  }
  body->clear();
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) body->append(buf, static_cast<size_t>(n));
  close(fd);
  return body->find(" 200 ") != std::string::npos;
}

struct Child {
  pid_t pid = -1;
  int out = -1;
  std::string output;
  ~Child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out >= 0) close(out);
  }
};

bool spawn(Child& child, std::vector<std::string> args) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  child.pid = fork();
  if (child.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a bench killed mid-run must not leave its agents behind
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  child.out = fds[0];
  return true;
}

// Reads the child's output until `pattern` matches (10 s at most); the first capture group.
std::string wait_for(Child& child, const std::regex& pattern) {
  std::smatch m;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!std::regex_search(child.output, m, pattern)) {
    if (std::chrono::steady_clock::now() > deadline) return {};
    pollfd p{child.out, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      char buf[4096];
      const ssize_t n = read(child.out, buf, sizeof(buf));
      if (n <= 0) return {};
      child.output.append(buf, static_cast<size_t>(n));
    }
  }
  return m[1];
}

// CPU milliseconds a server process spends per /metrics scrape, over `scrapes` scrapes.
double cpu_ms_per_scrape(pid_t pid, int port, int scrapes, size_t* bytes) {
  std::string body;
  if (!http_get(port, &body)) return -1;
  const int64_t before = process_cpu_ns(pid);
  for (int i = 0; i < scrapes; ++i) {
    if (!http_get(port, &body)) return -1;
  }
  *bytes = body.size();
  return static_cast<double>(process_cpu_ns(pid) - before) * 1e-6 / scrapes;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // figures appear as they are measured
  std::string agent_path = std::string(PODSCOPE_BINARY_DIR) + "/bin/podscope-agent";
  int idle_s = 10, scrapes = 300, passes = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--agent") agent_path = argv[i + 1];
    else if (flag == "--idle_s") idle_s = std::stoi(argv[i + 1]);
    else if (flag == "--scrapes") scrapes = std::stoi(argv[i + 1]);
    else if (flag == "--passes") passes = std::stoi(argv[i + 1]);
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }

  // --- in-process: one sampling pass vs just reading what it parses ---
  prometheus::Registry registry;
  SeriesStore store(registry, "bench", SeriesStore::capacity_for(600000, 1000));
  boost::asio::io_context io;
  podscope::Clock clock;
  Sampler sampler(io, clock, store, registry, "bench", std::chrono::milliseconds(1000));
  const HostCollectors host = make_host_collectors();
  for (const auto& c : host.all) sampler.add(*c);
  std::vector<std::unique_ptr<ProcFile>> files;
  for (const char* p : {"/proc/stat", "/proc/meminfo", "/proc/net/dev", "/proc/diskstats", "/proc/loadavg"}) {
    files.push_back(std::make_unique<ProcFile>(p));
  }
  const double read_us = cpu_us_per_call(passes, [&] {
    std::string_view text;
    for (auto& f : files) (void)f->read(text);
  });
  const double pass_us = cpu_us_per_call(passes, [&] { sampler.run_pass(); });
  std::string text;
  const double serialize_us =
      cpu_us_per_call(passes / 4, [&] { text = prometheus::TextSerializer().Serialize(registry.Collect()); });
  std::printf("host: %ld cores, %zu series, /metrics %zu bytes\n", sysconf(_SC_NPROCESSORS_ONLN), store.size(),
              text.size());
  std::printf(
      "sampling pass:         %8.1f us CPU   (baseline: reading the 5 /proc files %6.1f us; ratio %.2f; "
      "target <= 200 us)\n",
      pass_us, read_us, pass_us / read_us);
  std::printf("scrape serialization:  %8.1f us CPU   (in-process registry -> text)\n", serialize_us);

  // --- the real agent process ---
  Child agent;
  const std::string socket_path = "/tmp/podscope-bench-" + std::to_string(getpid()) + ".sock";
  if (!spawn(agent, {agent_path, "--listen", "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--socket", socket_path,
                     "--sample_interval_ms", "1000"})) {
    return 1;
  }
  const std::string metrics_port = wait_for(agent, std::regex(R"(metrics=[^ ]*:(\d+))"));
  if (metrics_port.empty()) {
    std::cerr << "agent did not start: " << agent.output << "\n";
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // past start-up
  const auto idle_before = thread_cpu_ns(agent.pid);
  std::this_thread::sleep_for(std::chrono::seconds(idle_s));
  const auto idle_after = thread_cpu_ns(agent.pid);
  std::map<std::string, int64_t> by_thread_name;
  int64_t idle_ns = 0;
  for (const auto& [tid, entry] : idle_after) {
    auto before = idle_before.find(tid);
    const int64_t ns = entry.second - (before == idle_before.end() ? 0 : before->second.second);
    by_thread_name[entry.first] += ns;
    idle_ns += ns;
  }
  const double idle_percent = static_cast<double>(idle_ns) * 1e-9 * 100.0 / idle_s;
  const double rss = process_rss_mb(agent.pid);
  size_t agent_bytes = 0;
  const double agent_scrape_ms = cpu_ms_per_scrape(agent.pid, std::stoi(metrics_port), scrapes, &agent_bytes);
  std::printf("agent idle CPU:        %8.4f %% of a core over %d s at 1 s sampling (target <= 0.1 %%); by thread:\n",
              idle_percent, idle_s);
  for (const auto& [name, ns] : by_thread_name) {
    std::printf("    %-16s %8.4f %%\n", name.c_str(), static_cast<double>(ns) * 1e-9 * 100.0 / idle_s);
  }
  std::printf("agent RSS:             %8.1f MB   (target <= 30 MB)\n", rss);
  std::printf("agent scrape:          %8.3f ms CPU per /metrics (%zu bytes, %d scrapes; target <= 1 ms)\n",
              agent_scrape_ms, agent_bytes, scrapes);

  // --- baseline: node_exporter, same machine, same run. Its default collector set can block in containers
  // (and covers far more), so it runs with the collectors that match the agent's host collectors.
  if (system("command -v prometheus-node-exporter >/dev/null 2>&1") == 0) {
    Child exporter;
    const int port = free_port();
    spawn(exporter, {"prometheus-node-exporter", "--web.listen-address=127.0.0.1:" + std::to_string(port),
                     "--collector.disable-defaults", "--collector.cpu", "--collector.meminfo", "--collector.netdev",
                     "--collector.diskstats", "--collector.loadavg", "--collector.timex"});
    std::string body;
    for (int i = 0; i < 100 && !http_get(port, &body); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    size_t ne_bytes = 0;
    const double ne_ms = cpu_ms_per_scrape(exporter.pid, port, scrapes, &ne_bytes);
    if (ne_ms < 0) {
      std::printf("node_exporter scrape:  failed (no answer within 5 s)\n");
    } else {
      std::printf(
          "node_exporter scrape:  %8.3f ms CPU per /metrics (%zu bytes; cpu, meminfo, netdev, diskstats, "
          "loadavg, timex collectors); agent/node_exporter ratio %.3f\n",
          ne_ms, ne_bytes, agent_scrape_ms / ne_ms);
      std::printf("node_exporter RSS:     %8.1f MB\n", process_rss_mb(exporter.pid));
    }
  } else {
    std::printf("node_exporter scrape:  not measured (prometheus-node-exporter not installed)\n");
  }
  unlink(socket_path.c_str());  // the agent is SIGKILLed on the way out and cannot remove it
  return 0;
}
