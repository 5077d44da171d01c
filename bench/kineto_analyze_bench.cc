// Peak memory of `podscope analyze` on large torch.profiler traces, as a ratio to the trace's uncompressed text. The
// traces are generated from a real one (default: the shared 2-rank NCCL job's rank 0): its events repeated, each
// copy moved past the one before (timestamps, ProfilerStep numbers, External ids and correlation ids shifted), the
// event text otherwise as Kineto wrote it, until the text reaches each size; written gzip, as
// tensorboard_trace_handler(use_gzip=True) writes it. Each `podscope analyze` runs as a child process on a directory
// of its own holding only the trace; its peak RSS is the kernel's (wait4's ru_maxrss). With `--baseline PATH` another
// build of podscope (e.g. main's, before a change) runs on the same files in the same run, so the figures compare.
// `--shape`: `kineto` (the events as Kineto wrote them), `minified` (without whitespace: more events per byte, a
// harsher case) or `same` (the source's first cpu_op written again and again unchanged: one step, one thread, the
// shape of a trace whose gigabyte gzips to a few MB).
//   kineto_analyze_bench [--sizes-mib 64,256,1024] [--shape kineto|minified|same] [--baseline PATH] [--podscope PATH]
//                        [--trace PATH]
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string inflate_file(const fs::path& path) {
  gzFile in = gzopen(path.c_str(), "rb");
  std::string text;
  if (in == nullptr) return text;
  char buffer[1 << 16];
  for (int n; (n = gzread(in, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  gzclose(in);
  return text;
}

// The number after `"key": ` in an event's text: where it starts and ends, or nothing.
std::optional<std::pair<size_t, size_t>> number_after(std::string_view event, std::string_view key) {
  const size_t at = event.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  size_t begin = at + key.size();
  while (begin < event.size() && (event[begin] == ' ' || event[begin] == ':')) ++begin;
  size_t end = begin;
  while (end < event.size() && (std::isdigit(static_cast<unsigned char>(event[end])) || event[end] == '.' ||
                                event[end] == '-' || event[end] == 'e' || event[end] == '+')) {
    ++end;
  }
  if (end == begin) return std::nullopt;
  return std::make_pair(begin, end);
}

// The event's text without the whitespace outside its strings.
std::string minified(std::string_view event) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < event.size(); ++i) {
    const char c = event[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < event.size()) out += event[++i];
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
      out += c;
    } else if (c != ' ' && c != '\n' && c != '\t' && c != '\r') {
      out += c;
    }
  }
  return out;
}

// One copy of the source's events, shifted: `copy` copies came before it.
class TraceCopies {
 public:
  explicit TraceCopies(const std::string& text) : text_(text) {
    // The events' extents: the objects one level inside the traceEvents array (strings skipped with their escapes).
    size_t at = text_.find("\"traceEvents\"");
    at = text_.find('[', at) + 1;
    int depth = 0;
    bool in_string = false;
    size_t start = 0;
    for (size_t i = at; i < text_.size(); ++i) {
      const char c = text_[i];
      if (in_string) {
        if (c == '\\') ++i;
        else if (c == '"') in_string = false;
        continue;
      }
      if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        if (depth++ == 0) start = i;
      } else if (c == '}' || c == ']') {
        if (depth == 0) break;  // the array's end
        if (--depth == 0) {
          events_.emplace_back(start, i + 1 - start);
          scan_extent(std::string_view(text_).substr(start, i + 1 - start));
        }
      }
    }
    // What comes before and after the events, as Kineto wrote it.
    head_ = text_.substr(0, events_.front().first);
    const size_t tail_at = events_.back().first + events_.back().second;
    tail_ = text_.substr(tail_at);
  }

  const std::string& head() const { return head_; }
  const std::string& tail() const { return tail_; }
  size_t events() const { return events_.size(); }
  size_t first_cpu_op() const {
    for (size_t i = 0; i < events_.size(); ++i) {
      if (std::string_view(text_).substr(events_[i].first, events_[i].second).find("\"cpu_op\"") != std::string::npos) {
        return i;
      }
    }
    return 0;
  }

  // Event `i` of copy `copy`.
  std::string event(size_t i, int64_t copy) const {
    std::string e = text_.substr(events_[i].first, events_[i].second);
    shift(
        e, "\"ts\"", [&](double v) { return v + static_cast<double>(copy) * span_us_; }, true);
    shift(
        e, "\"External id\"", [&](double v) { return v + static_cast<double>(copy) * (max_id_ + 1); }, false);
    shift(
        e, "\"correlation\"", [&](double v) { return v + static_cast<double>(copy) * (max_id_ + 1); }, false);
    if (const size_t at = e.find("\"ProfilerStep#"); at != std::string::npos) {
      const size_t begin = at + std::strlen("\"ProfilerStep#");
      const size_t end = e.find('"', begin);
      const int64_t step = std::stoll(e.substr(begin, end - begin)) + copy * (max_step_ + 1);
      e.replace(begin, end - begin, std::to_string(step));
    }
    return e;
  }

 private:
  template <typename Fn>
  static void shift(std::string& e, std::string_view key, Fn fn, bool fraction) {
    const auto where = number_after(e, key);
    if (!where) return;
    const double value = std::stod(e.substr(where->first, where->second - where->first));
    char out[64];
    std::snprintf(out, sizeof out, fraction ? "%.3f" : "%.0f", fn(value));
    e.replace(where->first, where->second - where->first, out);
  }

  void scan_extent(std::string_view raw) {
    const std::string e(raw);
    const auto ts = number_after(e, "\"ts\"");
    const auto dur = number_after(e, "\"dur\"");
    if (ts) {
      const double start = std::stod(e.substr(ts->first, ts->second - ts->first));
      const double end = start + (dur ? std::stod(e.substr(dur->first, dur->second - dur->first)) : 0);
      first_us_ = std::min(first_us_, start);
      last_us_ = std::max(last_us_, end);
      span_us_ = last_us_ - first_us_ + 1000;
    }
    for (std::string_view key : {"\"External id\"", "\"correlation\""}) {
      if (const auto id = number_after(e, key)) max_id_ = std::max(max_id_, std::stod(e.substr(id->first)));
    }
    if (const size_t at = e.find("\"ProfilerStep#"); at != std::string::npos) {
      max_step_ = std::max<int64_t>(max_step_, std::stoll(e.substr(at + std::strlen("\"ProfilerStep#"))));
    }
  }

  const std::string& text_;
  std::vector<std::pair<size_t, size_t>> events_;  // offset, length in text_
  std::string head_, tail_;
  double first_us_ = 1e300, last_us_ = -1e300, span_us_ = 0, max_id_ = 0;
  int64_t max_step_ = 0;
};

struct Written {
  uint64_t text_bytes = 0;
  uint64_t gzip_bytes = 0;
  uint64_t events = 0;
};

enum class Shape { kKineto, kMinified, kSame };

// Copies of the source's events, of `shape`, until the text reaches `target_bytes`, written gzip to `out`.
Written write_trace(const TraceCopies& copies, uint64_t target_bytes, Shape shape, const fs::path& out) {
  gzFile gz = gzopen(out.c_str(), "wb1");
  Written w;
  auto put = [&](std::string_view s) {
    gzwrite(gz, s.data(), static_cast<unsigned>(s.size()));
    w.text_bytes += s.size();
  };
  put(copies.head());
  bool first = true;
  for (int64_t copy = 0; w.text_bytes < target_bytes; ++copy) {
    for (size_t i = 0; i < copies.events(); ++i) {
      if (!first) put(shape == Shape::kMinified ? "," : ",\n  ");
      first = false;
      if (shape == Shape::kSame) put(copies.event(copies.first_cpu_op(), 0));
      else if (shape == Shape::kMinified) put(minified(copies.event(i, copy)));
      else put(copies.event(i, copy));
      ++w.events;
    }
  }
  put(copies.tail());
  gzclose(gz);
  w.gzip_bytes = fs::file_size(out);
  return w;
}

struct Run {
  int exit_code = -1;
  long peak_rss_kb = 0;
  double seconds = 0;
  double cpu_seconds = 0;  // user + system
  std::string last_line;   // of its stderr, for a refusal
};

// `podscope analyze DIR`, its output to a file in `log_dir`; its peak RSS from wait4.
Run analyze(const fs::path& podscope, const fs::path& dir, const fs::path& log) {
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execl(podscope.c_str(), "podscope", "analyze", dir.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  Run run;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.peak_rss_kb = usage.ru_maxrss;
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  run.cpu_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  std::istringstream lines(inflate_file(log));  // gzread reads plain files as they are
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) run.last_line = line;
  }
  return run;
}

// A run directory of its own for one analysis: the trace linked in, nothing else.
Run analyze_fresh(const fs::path& podscope, const fs::path& trace, const fs::path& work, const std::string& name) {
  const fs::path dir = work / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_hard_link(trace, dir / trace.filename());
  Run run = analyze(podscope, dir, work / (name + ".log"));
  fs::remove_all(dir);
  return run;
}

std::vector<uint64_t> parse_sizes(const std::string& text) {
  std::vector<uint64_t> sizes;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) sizes.push_back(std::stoull(item));
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path trace = fs::path(PODSCOPE_SOURCE_DIR) / "../shared/testdata/kineto/nccl_2rank_rank0.pt.trace.json.gz";
  fs::path podscope = fs::path(PODSCOPE_BINARY_DIR) / "bin/podscope";
  fs::path baseline;
  std::vector<uint64_t> sizes_mib = {64, 256, 1024};
  Shape shape = Shape::kKineto;
  std::string shape_name = "kineto";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--trace") trace = argv[i + 1];
    else if (flag == "--podscope") podscope = argv[i + 1];
    else if (flag == "--baseline") baseline = argv[i + 1];
    else if (flag == "--sizes-mib") sizes_mib = parse_sizes(argv[i + 1]);
    else if (flag == "--shape") shape_name = argv[i + 1];
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (shape_name == "minified") shape = Shape::kMinified;
  else if (shape_name == "same") shape = Shape::kSame;
  else if (shape_name != "kineto") {
    std::cerr << "--shape is kineto, minified or same\n";
    return 2;
  }
  if (!fs::exists(trace)) {
    std::cerr << "no trace at " << trace << " (pass --trace PATH)\n";
    return 2;
  }
  const std::string source = inflate_file(trace);
  const TraceCopies copies(source);
  const fs::path work = fs::temp_directory_path() / ("kineto_analyze_bench_" + std::to_string(getpid()));
  fs::create_directories(work);
  std::printf("source: %s, %zu events, %.1f MiB of text; shape %s\n", trace.c_str(), copies.events(),
              static_cast<double>(source.size()) / (1 << 20), shape_name.c_str());
  std::printf("%10s %10s %10s | %-9s %10s %8s %8s %8s %6s | %s\n", "text MiB", "gzip MiB", "events", "podscope",
              "peak MiB", "x text", "wall s", "cpu s", "exit", "after/before: peak, cpu");
  for (const uint64_t mib : sizes_mib) {
    const fs::path file = work / "rank0.pt.trace.json.gz";
    const Written w = write_trace(copies, mib << 20, shape, file);
    const double text_mib = static_cast<double>(w.text_bytes) / (1 << 20);
    auto report = [&](const char* which, const Run& run, const std::string& ratio) {
      const double peak_mib = static_cast<double>(run.peak_rss_kb) / 1024;
      std::printf("%10.1f %10.1f %10" PRIu64 " | %-9s %10.1f %8.2f %8.1f %8.1f %6d | %s\n", text_mib,
                  static_cast<double>(w.gzip_bytes) / (1 << 20), w.events, which, peak_mib, peak_mib / text_mib,
                  run.seconds, run.cpu_seconds, run.exit_code, ratio.c_str());
      if (run.exit_code != 0) std::printf("%34s %s\n", "", run.last_line.c_str());
      std::fflush(stdout);
    };
    std::optional<Run> before;
    if (!baseline.empty()) {
      before = analyze_fresh(baseline, file, work, "before");
      report("before", *before, "");
    }
    const Run after = analyze_fresh(podscope, file, work, "after");
    char ratio[48] = "";
    if (before)
      std::snprintf(ratio, sizeof ratio, "%.2f, %.2f", static_cast<double>(after.peak_rss_kb) / before->peak_rss_kb,
                    after.cpu_seconds / before->cpu_seconds);
    report("after", after, ratio);
    fs::remove(file);
  }
  fs::remove_all(work);
  return 0;
}
