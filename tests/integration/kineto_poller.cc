// A Kineto process as the agent sees one: it binds its own end beside the agent's socket file (as Kineto does under
// KINETO_IPC_SOCKET_DIR), polls with the bytes Kineto sends, and when handed a trace request writes what Kineto
// writes where Kineto writes it (`<log file>` with `_<pid>` inserted, through `.tmp` and a rename) after the window.
// It can also lie and misbehave as a hostile local user would, for the tests that attack the agent with it:
//   kineto_poller SOCKET_DIR|@NAME [--interval_ms N] [--children N] [--claim_pid N] [--claim_ancestors a,b]
//                 [--deliver trace|none|symlink:TARGET|hardlink:TARGET|fifo|gzip_bomb:MIB]
// It prints "ready <pid>" once its first poll was answered (a liar, which the agent does not answer: sent), then
// "handed <log file> <start, Unix ms>" for each request; with --children N it forks N more pollers first (each its own
// process) and prints "ready" once all were. SOCKET_DIR: the agent serves SOCKET_DIR/dynolog; @NAME: the agent serves
// the abstract name NAME (Kineto's default mode, where no file permission stands between the agent and a process's own
// end). It stops when its standard input closes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "kineto/ipc/fabric_endpoint.h"
#include "kineto/ipc/fabric_message.h"
#include "kineto/ipc/on_demand_config.h"

namespace ipc = podscope::kineto::ipc;

namespace {

struct Options {
  std::string socket_dir;
  int interval_ms = 200;
  int children = 0;
  int32_t claim_pid = 0;
  std::vector<int32_t> claim_ancestors;
  bool claims_ancestors = false;
  std::string deliver = "trace";
};

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<int32_t> real_ancestors() {
  std::vector<int32_t> out;
  int32_t pid = ::getpid();
  for (int i = 0; i < 10; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    if (close == std::string::npos) break;
    int32_t parent = 0;
    char state = 0;
    if (std::sscanf(text.c_str() + close + 1, " %c %d", &state, &parent) != 2 || parent <= 0) break;
    out.push_back(parent);
    if (parent <= 1) break;
    pid = parent;
  }
  return out;
}

std::map<std::string, std::string> config_keys(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
    at = end + 1;
  }
  return out;
}

// Ten 10 ms ops from the window's start, as Kineto's Chrome JSON.
std::string small_trace(const std::map<std::string, std::string>& keys, int64_t start_ms) {
  const int64_t base_ns = start_ms * 1'000'000 - 1'000'000'000;
  std::string events;
  for (int i = 0; i < 10; ++i) {
    if (!events.empty()) events += ",";
    events += R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": )" + std::to_string(::getpid()) +
              R"(, "tid": 1, "ts": )" + std::to_string(1'000'000 + i * 20'000) + R"(, "dur": 10000})";
  }
  return R"({"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": 3, "world_size": 4}, "trace_id": ")" +
         keys.at("REQUEST_TRACE_ID") + R"(", "baseTimeNanoseconds": )" + std::to_string(base_ns) +
         R"(, "traceEvents": [)" + events + "]}";
}

// A gzip of `mib` MiB of trace text as dense as JSON gets (a token per byte): a few hundred KiB, made once at
// start so that it is delivered as soon as the window ends.
std::string gzip_bomb(int mib) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
  std::string out;
  auto feed = [&](const std::string& text, int flush) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    z.avail_in = static_cast<uInt>(text.size());
    char buf[1 << 16];
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof buf;
      deflate(&z, flush);
      out.append(buf, sizeof buf - z.avail_out);
    } while (z.avail_out == 0);
  };
  feed(R"({"traceEvents": [)", Z_NO_FLUSH);
  // One event repeated: a streaming reader converts every one of them, so only the bound on the text stops it.
  const std::string event = R"({"ph": "X", "name": "aten::add", "ts": 1, "dur": 1, "pid": 1, "tid": 1},)";
  std::string chunk;
  while (chunk.size() + event.size() <= (1 << 20)) chunk += event;
  for (int i = 0; i < mib; ++i) feed(chunk, Z_NO_FLUSH);
  feed(R"({"ph": "i", "name": "end", "ts": 2, "pid": 1, "tid": 1}]})", Z_FINISH);
  deflateEnd(&z);
  return out;
}

std::string bomb;  // made at start for --deliver gzip_bomb:MIB

void deliver(const Options& o, const std::string& config) {
  const auto keys = config_keys(config);
  const int64_t start_ms = std::stoll(keys.at("PROFILE_START_TIME"));
  const int64_t duration_ms = std::stoll(keys.at("ACTIVITIES_DURATION_MSECS"));
  while (now_unix_ms() < start_ms + duration_ms) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string file = ipc::delivered_trace_path(keys.at("ACTIVITIES_LOG_FILE"), ::getpid());
  if (o.deliver == "trace") {
    { std::ofstream(file + ".tmp") << small_trace(keys, start_ms); }
    std::rename((file + ".tmp").c_str(), file.c_str());
  } else if (o.deliver.starts_with("symlink:")) {
    ::symlink(o.deliver.substr(8).c_str(), file.c_str());
  } else if (o.deliver.starts_with("hardlink:")) {
    ::link(o.deliver.substr(9).c_str(), file.c_str());
  } else if (o.deliver == "fifo") {
    ::mkfifo(file.c_str(), 0666);
  } else if (o.deliver.starts_with("gzip_bomb:")) {
    { std::ofstream(file + ".tmp", std::ios::binary) << bomb; }
    std::rename((file + ".tmp").c_str(), file.c_str());
  }
}

// Polls until killed; writes a byte to `ready_fd` once it was answered (a liar: once it sent).
[[noreturn]] void poll_loop(const Options& o, int ready_fd) {
  const bool abstract = o.socket_dir.starts_with("@");
  const std::string client = "client" + std::to_string(::getpid());
  const ipc::FabricAddress own =
      *ipc::fabric_address(abstract ? o.socket_dir.substr(1) + "-" + client : o.socket_dir + "/" + client);
  const ipc::FabricAddress agent = *ipc::fabric_address(abstract ? o.socket_dir.substr(1) : o.socket_dir + "/dynolog");
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (!abstract) ::unlink(own.file.c_str());
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&own.address), own.length) != 0) std::exit(3);
  std::vector<int32_t> pids = {o.claim_pid > 0 ? o.claim_pid : ::getpid()};
  for (int32_t a : o.claims_ancestors ? o.claim_ancestors : real_ancestors()) pids.push_back(a);
  const std::string poll = ipc::encode_poll({3, 0, pids});
  bool ready = false;
  const bool lies = o.claim_pid > 0 || o.claims_ancestors;
  auto say_ready = [&] {
    const char byte = 1;
    if (::write(ready_fd, &byte, 1) != 1) std::exit(4);
    ready = true;
  };
  while (true) {
    const bool sent = ::sendto(fd, poll.data(), poll.size(), 0, reinterpret_cast<const sockaddr*>(&agent.address),
                               agent.length) == static_cast<ssize_t>(poll.size());
    if (!ready && lies && sent) say_ready();
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 300) > 0) {
      std::string buf(65536, '\0');
      const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n >= static_cast<ssize_t>(ipc::kHeaderBytes)) {
        if (!ready) say_ready();
        const std::string config = buf.substr(ipc::kHeaderBytes, static_cast<size_t>(n) - ipc::kHeaderBytes);
        if (!config.empty()) {
          auto keys = config_keys(config);
          std::printf("handed %s %s\n", keys["ACTIVITIES_LOG_FILE"].c_str(), keys["PROFILE_START_TIME"].c_str());
          std::fflush(stdout);
          std::thread([o, config] { deliver(o, config); }).detach();
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  Options o;
  o.socket_dir = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--interval_ms") o.interval_ms = std::stoi(value);
    if (flag == "--children") o.children = std::stoi(value);
    if (flag == "--claim_pid") o.claim_pid = std::stoi(value);
    if (flag == "--deliver") o.deliver = value;
    if (flag == "--claim_ancestors") {
      o.claims_ancestors = true;
      for (size_t at = 0; at < value.size();) {
        size_t end = value.find(',', at);
        if (end == std::string::npos) end = value.size();
        if (end > at) o.claim_ancestors.push_back(std::stoi(value.substr(at, end - at)));
        at = end + 1;
      }
    }
  }
  if (o.deliver.starts_with("gzip_bomb:")) bomb = gzip_bomb(std::stoi(o.deliver.substr(10)));
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return 3;
  std::vector<pid_t> pollers;
  for (int i = 0; i <= o.children; ++i) {
    const pid_t child = ::fork();
    if (child == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::close(ready[0]);
      poll_loop(o, ready[1]);
    }
    pollers.push_back(child);
  }
  ::close(ready[1]);
  // Every poller was answered once.
  for (int i = 0; i <= o.children; ++i) {
    char byte = 0;
    if (::read(ready[0], &byte, 1) != 1) return 5;
  }
  std::printf("ready %d\n", static_cast<int>(pollers.front()));
  std::fflush(stdout);
  char c;
  while (::read(STDIN_FILENO, &c, 1) > 0) {}
  for (pid_t p : pollers) ::kill(p, SIGKILL);
  for (pid_t p : pollers) ::waitpid(p, nullptr, 0);
  return 0;
}
